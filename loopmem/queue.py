"""Enqueueing Celery tasks after the surrounding transaction commits, without ever failing the write."""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import Task
from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue_on_commit(task: Task, *args: Any) -> None:
    """Send `task(*args)` once the transaction commits.

    If the broker is down the send fails, is logged, and the write stands: every task here has a sweep that
    finds the rows it would have handled.
    """
    transaction.on_commit(functools.partial(_send, task, args))


def _send(task: Task, args: tuple[Any, ...]) -> None:
    try:
        task.apply_async(args=args, retry=False)
    except Exception:
        logger.warning("could not enqueue %s%r; its sweep will pick it up", task.name, args, exc_info=True)
