"""gunicorn settings for the web process: `gunicorn -c config/gunicorn.py config.wsgi:application`.

With PROMETHEUS_MULTIPROC_DIR set, each gunicorn worker records metrics into that directory and /metrics sums
them; the directory must belong to this web process group alone. gunicorn reads this file before Django is set
up (and before it changes into `--chdir`, so the project may not be importable yet), so the environment is read
here directly (the one exception to "settings read the environment").
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

# One access-log line a request on stdout; the application's own lines are JSON when LOOPMEM_LOG_FORMAT=json.
accesslog = "-"

# Sizing (docs/operations.md, "Sizing the web process"): workers x threads is how many requests run at once.
# Defaults by measurement (docs/reliability.md, "Sizing gunicorn"): 2 sync workers x 1 thread served the 50-agent
# load best on 2 cores (70 req/s against 54-58 with threads): requests are CPU-bound Python, threads contend for the
# GIL. `gthread` keeps client connections alive between requests; `sync` closes each one.
workers = int(os.environ.get("LOOPMEM_WEB_WORKERS") or 2)
threads = int(os.environ.get("LOOPMEM_WEB_THREADS") or 1)
worker_class = os.environ.get("LOOPMEM_WEB_WORKER_CLASS") or ("gthread" if threads > 1 else "sync")
# How long an idle kept-alive client connection is held open (gthread), in seconds.
keepalive = int(os.environ.get("LOOPMEM_WEB_KEEPALIVE_SECONDS") or 5)
# What the server refuses before the application runs (docs/api.md, "Refusals of the HTTP server"): gunicorn's own
# defaults, stated here so the documented limits are the ones in force. The answers are in the API's envelope.
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190


def on_starting(server: Any) -> None:
    """Clear values a previous run left behind (they would be summed into this run's counters)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob("*.db"):
            stale.unlink()


def post_worker_init(worker: Any) -> None:
    """Load the views, then move every object loaded so far out of the garbage collector's sight (`gc.freeze`).

    A worker holds ~190,000 long-lived objects (Django, DRF, the app's modules): a full collection scanned all of
    them, ~80 ms, inside whichever request triggered it (about one in 550 recalls). Frozen, it scans only what was
    made since (2.4 ms measured). Modules are never unloaded, so freezing them leaks nothing.
    """
    from django.urls import get_resolver

    from loopmem.http.server_refusals import install

    install()  # the server's own refusals (414, 431, a malformed header) in the API's error envelope
    from loopmem.secret_guard import rules

    rules.scanner()  # the secret rules compiled before the first write, not during it
    get_resolver().url_patterns  # noqa: B018 -- imports every view now, so they are frozen too
    gc.freeze()


def child_exit(server: Any, worker: Any) -> None:
    """A gunicorn worker that exited stops counting in live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
