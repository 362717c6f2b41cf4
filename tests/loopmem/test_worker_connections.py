"""Celery workers reuse database connections by Django's rules instead of reconnecting around every task."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from celery import signals
from celery.fixups.django import DjangoWorkerFixup
from django.db import connection

from config.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


class _Task:
    """What the signal handlers read of a task (a real task's request stack is only filled inside a worker)."""

    name = "memory.tasks.embed_memory_task"

    def __init__(self, *, eager: bool = False) -> None:
        self.request = SimpleNamespace(is_eager=eager)


def _open_session() -> object:
    connection.ensure_connection()
    return connection.connection


def _run_task_signals(task: _Task) -> None:
    signals.task_prerun.send(sender=task, task_id="t-1", task=task, args=(), kwargs={})
    signals.task_postrun.send(sender=task, task_id="t-1", task=task, args=(), kwargs={}, retval=None, state="SUCCESS")


def test_celerys_fixup_no_longer_closes_the_connection_around_each_Task():
    fixup = DjangoWorkerFixup(app)
    session = _open_session()
    for _ in range(5):  # prerun and postrun of five tasks
        fixup.on_task_prerun(sender=_Task())
        fixup.on_task_postrun(sender=_Task())
    assert connection.connection is session


def test_a_task_keeps_a_fresh_connection():
    session = _open_session()
    _run_task_signals(_Task())
    assert connection.connection is session


def test_a_task_closes_a_connection_past_conn_max_age():
    _open_session()
    connection.close_at = time.monotonic() - 1
    _run_task_signals(_Task())
    assert connection.connection is None


def test_an_eager_task_leaves_its_callers_connection_alone():
    session = _open_session()
    connection.close_at = time.monotonic() - 1
    _run_task_signals(_Task(eager=True))
    assert connection.connection is session
