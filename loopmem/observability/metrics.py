"""The service's Prometheus series, defined once; every process (web, worker) records into them.

Events are counted where they happen (a counter or histogram in the code path). States that live in the
database or Redis (backlog, job states, open circuits, queue depth) are read at scrape time by the state
sources apps register (`register_state_source`), so every process agrees and nothing drifts.

Under gunicorn and Celery prefork, `PROMETHEUS_MULTIPROC_DIR` makes prometheus_client keep each process's
values in files that the exporter sums (docs/operations.md, "Metrics").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

P = ParamSpec("P")
R = TypeVar("R")

# Latency buckets from 5 ms to 30 s: recall is tens of ms, embedding and compiles reach seconds.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

HTTP_REQUESTS = Counter(
    "loopmem_http_requests",
    "HTTP requests answered, by route (URL name), method and status",
    ["route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "loopmem_http_request_seconds", "HTTP request latency by route", ["route", "method"], buckets=_BUCKETS
)
RECALL_SECONDS = Histogram(
    "loopmem_recall_seconds",
    "Recall latency (request to response) by route, path (exact | ann | fallback) and mode",
    ["route", "path", "mode"],
    buckets=_BUCKETS,
)
EMBEDDING_SECONDS = Histogram(
    "loopmem_embedding_seconds", "Embedding provider call latency by provider and outcome", ["provider", "outcome"],
    buckets=_BUCKETS,
)  # fmt: skip
QUERY_EMBEDDING_CACHE = Counter(
    "loopmem_query_embedding_cache", "Query-embedding cache lookups by result (hit | miss)", ["result"]
)
CIRCUIT_OPENED = Counter("loopmem_circuit_breaker_opened", "Times a provider's circuit opened", ["provider"])
PROMOTION_EVENTS = Counter("loopmem_promotion_events", "Promotion pipeline events (memory_promotion.*)", ["event"])
PROMOTION_QUARANTINED = Counter(
    "loopmem_promotion_quarantined",
    "Promotion candidates the injection guard refused (never written), by the rule that fired",
    ["rule"],
)
PROMOTION_COMPILE_SECONDS = Histogram(
    "loopmem_promotion_compile_seconds", "Session compile latency by compiler", ["compiler"], buckets=_BUCKETS
)
RECALL_BUMPS_DROPPED = Counter(
    "loopmem_recall_bumps_dropped", "Recall-count bumps dropped: RECALL_BUMP_MAX_TASKS bump tasks were already waiting"
)
GRADUATIONS = Counter("loopmem_graduations", "Graduation attempts by outcome (the verdict, or the error)", ["outcome"])
RATE_LIMIT_REJECTIONS = Counter(
    "loopmem_rate_limit_rejections", "Requests refused with 429 rate_limited, by the limit hit", ["limit"]
)
HEAVY_READ_REJECTIONS = Counter(
    "loopmem_heavy_read_rejections", "Heavy reads shed with 429 heavy_read_overloaded (per-tenant cap reached)"
)
HEAVY_READ_ADMITTED = Counter("loopmem_heavy_read_admitted", "Heavy reads admitted by the per-tenant gate")
CELERY_TASKS = Counter("loopmem_celery_tasks", "Celery tasks finished, by task name and state", ["task", "state"])
CELERY_TASK_SECONDS = Histogram(
    "loopmem_celery_task_seconds", "Celery task run time by task name", ["task"], buckets=_BUCKETS
)
# Set by the exporter at scrape time: how long the state sources took, so a slow one is visible.
STATE_SCRAPE_SECONDS = Gauge(
    "loopmem_state_scrape_seconds", "Time spent reading database and Redis state at the last scrape",
    multiprocess_mode="mostrecent",
)  # fmt: skip


@contextmanager
def timer(histogram: Histogram, **labels: str) -> Iterator[None]:
    """Observe the wrapped block's duration (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.labels(**labels).observe(time.perf_counter() - started)


def counts_outcome(counter: Counter, outcome_of: Callable[[object], str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a use case so each call counts one outcome: `outcome_of(result)`, or the exception's class name."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                result = function(*args, **kwargs)
            except Exception as exc:
                counter.labels(outcome=type(exc).__name__).inc()
                raise
            counter.labels(outcome=outcome_of(result)).inc()
            return result

        return wrapper

    return decorate


# --- State read at scrape time ------------------------------------------------------------------------------

StateSource = Callable[[], Iterable[GaugeMetricFamily]]
_STATE_SOURCES: dict[str, StateSource] = {}


def register_state_source(name: str, source: StateSource) -> None:
    """Add a scrape-time reader of state (apps call this from `AppConfig.ready`); re-registering replaces it."""
    _STATE_SOURCES[name] = source


def state_sources() -> dict[str, StateSource]:
    """The registered scrape-time readers, by name."""
    return dict(_STATE_SOURCES)


def gauge(name: str, documentation: str, label: str, values: dict[str, float]) -> GaugeMetricFamily:
    """One gauge family with a single label, from a {label value: number} mapping."""
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value, number in sorted(values.items()):
        family.add_metric([value], number)
    return family
