"""PostgreSQL connections: the backend, the router, statement timeouts, asynchronous commit, Citus distribution.

`backend` is the Django engine (a health check that costs no round trip), `router` sends only explicit heavy reads to
the `heavy_read` alias, `timeouts` binds statement timeouts to connections, `async_commit` marks bookkeeping writes
that need not wait for the disk, `tenant_routing` and `citus` shard by tenant, `worker_connections` gives Celery
workers the connection rules of a web request.
"""
