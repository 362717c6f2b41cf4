"""gunicorn settings for the web process: `gunicorn -c config/gunicorn.py config.wsgi:application`.

With PROMETHEUS_MULTIPROC_DIR set, each gunicorn worker records metrics into that directory and /metrics sums
them; the directory must belong to this web process group alone. gunicorn reads this file before Django is set
up, so the environment is read here directly (the one exception to "settings read the environment").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

# One access-log line a request on stdout; the application's own lines are JSON when LOOPMEM_LOG_FORMAT=json.
accesslog = "-"


def on_starting(server: Any) -> None:
    """Clear values a previous run left behind (they would be summed into this run's counters)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for stale in Path(directory).glob("*.db"):
            stale.unlink()


def child_exit(server: Any, worker: Any) -> None:
    """A gunicorn worker that exited stops counting in live gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
