"""Services enqueue tasks by name (no import of `tasks`): every name they send must be a registered task. Every beat
entry's task retries transient database and Redis errors (loopmem.runtime.task_retry)."""

from __future__ import annotations

import pytest
from celery import current_app
from django.db import OperationalError

from config.celery import beat_schedule
from knowledge.embedding import EMBED_ARTICLE_TASK
from loopmem.runtime.task_retry import PERIODIC_TASK_OPTIONS, TRANSIENT_ERRORS
from memory import session_tier
from memory.embedding import EMBED_MEMORY_TASK, EMBED_PENDING_MEMORIES_TASK
from memory.promotion.jobs import PROMOTE_SESSION_TASK
from memory.recall_bump import BUMP_RECALL_COUNTS_TASK
from memory.tasks import prune_session_turns_task


@pytest.mark.parametrize(
    "name",
    [EMBED_MEMORY_TASK, EMBED_PENDING_MEMORIES_TASK, BUMP_RECALL_COUNTS_TASK, PROMOTE_SESSION_TASK, EMBED_ARTICLE_TASK],
)
def test_every_enqueued_name_is_a_registered_task(name: str) -> None:
    current_app.loader.import_default_modules()
    assert name in current_app.tasks


def test_every_beat_entry_runs_a_task_that_retries_transient_database_and_redis_errors() -> None:
    current_app.loader.import_default_modules()
    for entry, schedule in beat_schedule().items():
        task = current_app.tasks[schedule["task"]]
        assert set(TRANSIENT_ERRORS) <= set(getattr(task, "autoretry_for", ())), entry
        options = {option: getattr(task, option) for option in PERIODIC_TASK_OPTIONS}
        assert options == PERIODIC_TASK_OPTIONS, entry  # backoff, its cap and a bounded number of retries


def test_a_beat_task_that_meets_a_database_restart_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def prune() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return 3

    monkeypatch.setattr(session_tier, "session_prune", prune)
    result = prune_session_turns_task.apply()  # eager: the retry runs at once, in place
    assert (result.get(), len(calls)) == (3, 2)
