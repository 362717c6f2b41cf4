"""loopmem's core: what every app (memory, knowledge, recall, privacy, projects) stands on, in one-topic wings.

Base modules: `errors` (domain errors with stable codes), `params` (the wire's rules, free of DRF), `crypto` (secrets
at rest), `models` (tenants and API keys). The wings, top to bottom (pyproject.toml's import contracts keep the
arrows pointing down):

- `http`: the request's way in and out (authentication, edge checks, rate limits, idempotency, error envelope).
- `reads`: the guarded heavy-read path (WHERE guard, scoped sessions, the per-tenant gate, prepared reads).
- `embedding`: text to vectors and the pipeline that keeps every embedded row's vector current.
- `tenancy`: who is calling and on whose behalf (principals, scopes, keys, the deletion audit).
- `providers`: the outside LLM and embedding providers (clients, circuit breaker).
- `secret_guard`: secrets found and refused before anything is stored.
- `runtime`: processes and background work (supervisor, embedded servers, Celery enqueue and retries, schedules).
- `database`: PostgreSQL connections (backend, router, timeouts, Citus distribution).
- `redis`: the shared Redis client, the Django cache on it, and the outage latch.
- `observability`: the Prometheus series, JSON logs, the worker's exporter.
- `ranking`: score separation, the basis of every answer-confidence rule.
"""
