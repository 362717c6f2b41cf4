"""A Celery worker's metrics: tasks by name and state, run time, and its own exporter (no pushgateway).

Connected to Celery's signals by config.celery. With prefork each child records into PROMETHEUS_MULTIPROC_DIR;
the worker's main process serves the sum on LOOPMEM_WORKER_METRICS_PORT.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from prometheus_client import multiprocess, start_http_server
from prometheus_client.registry import REGISTRY, CollectorRegistry

from loopmem.observability import metrics

logger = logging.getLogger(__name__)


def task_started(task: Any = None, **_: Any) -> None:
    """`task_prerun`: note the start on the task's request."""
    if task is not None:
        task.request.loopmem_started = time.perf_counter()


def task_finished(task: Any = None, state: str | None = None, **_: Any) -> None:
    """`task_postrun`: count the task by its final state and observe its run time."""
    if task is None:
        return
    metrics.CELERY_TASKS.labels(task=task.name, state=(state or "UNKNOWN").lower()).inc()
    started = getattr(task.request, "loopmem_started", None)
    if started is not None:
        metrics.CELERY_TASK_SECONDS.labels(task=task.name).observe(time.perf_counter() - started)


def serve_worker_metrics(**_: Any) -> None:
    """`worker_init`: a clean multiprocess directory, and this worker's series on its own port if one is set."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        # The directory belongs to this worker alone: values a previous run left would be summed into ours.
        # This process's own files (its metrics were created at import) stay: it writes through them.
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob("*.db"):
            if not stale.stem.endswith(f"_{os.getpid()}"):
                stale.unlink()
    port = settings.WORKER_METRICS_PORT
    if not port:
        return
    if directory:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    start_http_server(port, addr=settings.WORKER_METRICS_ADDR, registry=registry)
    logger.info("worker metrics on %s:%s", settings.WORKER_METRICS_ADDR, port)


def child_exited(pid: int | None = None, **_: Any) -> None:
    """`worker_process_shutdown`: a prefork child's live gauges stop counting."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
