"""Enqueueing Celery tasks after the surrounding transaction commits, without ever failing the write.

Tasks are sent by name: a service that enqueues never imports its app's `tasks` module (which imports the
services), so there is no import cycle to keep alive with function-local imports.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import current_app
from django.db import transaction

from loopmem.redis import outage
from loopmem.runtime import after_response

logger = logging.getLogger(__name__)


def enqueue_on_commit(task_name: str, *args: Any) -> None:
    """Send the task `task_name` with `args` once the transaction commits.

    If the broker is down the send fails, is logged, and the write stands: every task here has a sweep that
    finds the rows it would have handled.
    """
    transaction.on_commit(functools.partial(send, task_name, args))


def send(task_name: str, args: tuple[Any, ...]) -> None:
    """Send after the current request's response is out (loopmem.runtime.after_response), at once outside a request."""
    after_response.run_or_defer(functools.partial(send_now, task_name, args))


def send_now(task_name: str, args: tuple[Any, ...], *, countdown: float = 0) -> bool:
    """Send now (outside any transaction), logging instead of raising when the broker is unreachable; True if sent.
    `countdown`: seconds the worker waits before running it (the message itself goes now).

    Bounded: no publish retry, and the broker's socket timeouts (settings). While `redis_outage` knows Redis is
    down the send is skipped outright, so the write's answer never waits on a hung broker more than once.
    """
    if outage.is_down():
        logger.warning("redis down, not enqueueing %s%r; its sweep will pick it up", task_name, args)
        return False
    try:
        current_app.send_task(task_name, args=args, retry=False, countdown=countdown or None)
    except outage.REDIS_ERRORS as exc:
        outage.record_failure("celery publish", exc)
        logger.warning("could not enqueue %s%r; its sweep will pick it up", task_name, args)
        return False
    except Exception:
        logger.warning("could not enqueue %s%r; its sweep will pick it up", task_name, args, exc_info=True)
        return False
    return True


# kombu's Redis transport keeps a queue's prioritised messages in sibling lists: name, name\x06\x163, ...
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def broker_lists(queue: str) -> list[str]:
    """The Redis lists holding `queue`'s waiting messages: the sum of their LLENs is the queue's depth."""
    return [queue + suffix for suffix in _PRIORITY_SUFFIXES]
