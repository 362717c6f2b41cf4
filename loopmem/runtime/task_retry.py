"""The retry policy of the periodic (beat) tasks: one definition, spread into each task's decorator.

Beat sends each pass once per interval; a pass that meets a database restarting or a Redis blip would otherwise be
lost until the next run (an hour, a day for the daily ones). These errors are worth a retry and nothing else is: a
bug or bad data fails the same way every time. Every periodic task is a pass over the current state (embed what
has no vector, delete what expired, enqueue what is due, upsert a day's figures), so running it again after a
failure halfway does what was left and nothing twice. tests/architecture/test_task_names.py checks that every
beat entry's task carries this policy.
"""

from __future__ import annotations

from typing import Any, Final

from django.db import InterfaceError, OperationalError

from loopmem.redis.outage import REDIS_ERRORS

# A lost or refused connection (OperationalError), one already closed under us (InterfaceError), an unreachable or
# hung Redis or broker (REDIS_ERRORS).
TRANSIENT_ERRORS: Final[tuple[type[BaseException], ...]] = (OperationalError, InterfaceError, *REDIS_ERRORS)

PERIODIC_TASK_OPTIONS: Final[dict[str, Any]] = {
    "autoretry_for": TRANSIENT_ERRORS,
    # Waits of at most 5, 10, 20, 40 and 80 s (each drawn at random up to that, so passes that failed together do
    # not come back together): up to two and a half minutes of outage, less than the shortest interval (5 min).
    "retry_backoff": 5,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 5,
}
