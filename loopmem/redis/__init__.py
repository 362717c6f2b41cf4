"""Redis: the one shared client, the Django cache backend on it, and the latch that remembers an outage.

`client` holds the process's client (short timeouts), `cache_backend` is the Django cache (rate limits count there),
`outage` makes one request pay for a Redis outage at most once; every caller fails open through it.
"""
