"""The request's way in and out: everything that knows about HTTP, DRF or the wire envelope.

Authentication (`auth`), the custody permission (`custody`), hostile input stopped at the edge (`edge`), rate limits
(`ratelimit`, django-ratelimit on the Redis cache), `Idempotency-Key` (`idempotency`), the request id (`request_id`),
the one error renderer (`error_responses`) and the server's own refusals (`server_refusals`), the base view
(`base_view`), input fields (`inputs`), envelopes and `meta.outcome` (`envelopes`, `outcome`), OpenAPI (`openapi`),
health probes (`health`) and `GET /metrics` (`metrics_endpoint`, `metrics_scrape`). No wing below imports this one.
"""
