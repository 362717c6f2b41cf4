"""The beat schedule: every entry named here with its task and cadence, every task registered, and every entry in
the database scheduler beat really runs (django-celery-beat's DatabaseScheduler, loaded at start-up)."""

from __future__ import annotations

import pytest
from celery import current_app
from celery.schedules import crontab
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from config.celery import beat_schedule
from knowledge import tasks as knowledge_tasks
from loopmem.runtime.schedules import longest_gap_seconds
from memory import tasks as memory_tasks
from privacy import tasks as privacy_tasks

# entry -> (the task it runs, the longest gap between two runs, in seconds, at the default settings)
EXPECTED = {
    "memory-embedding-sweep": (memory_tasks.embedding_sweep_task, 300),
    "session-prune": (memory_tasks.prune_session_turns_task, 3600),
    "promotion-sweep": (memory_tasks.promotion_sweep_task, 3600),
    "retention-prune": (privacy_tasks.retention_prune_task, 3600),
    "graduation-sweep": (memory_tasks.graduation_sweep_task, 3600),
    "promotion-eval": (memory_tasks.promotion_eval_task, 86400),
    "knowledge-embedding-sweep": (knowledge_tasks.article_embedding_sweep_task, 300),
    "knowledge-retrieval-metrics": (knowledge_tasks.retrieval_metrics_task, 86400),
}


def test_every_entry_is_known_here_with_its_task_and_cadence():
    schedule = beat_schedule()
    assert set(schedule) == set(EXPECTED)  # a new periodic pass is added here, with what it runs and how often
    for entry, (task, gap) in EXPECTED.items():
        assert schedule[entry]["task"] == task.name, entry
        assert longest_gap_seconds(schedule[entry]["schedule"]) == gap, entry


@pytest.mark.parametrize("entry", sorted(EXPECTED))
def test_every_entry_names_a_registered_task(entry):
    current_app.loader.import_default_modules()
    assert beat_schedule()[entry]["task"] in current_app.tasks


def test_the_retention_prune_runs_hourly_at_27_and_the_promotion_eval_daily_at_0445():
    schedule = beat_schedule()
    assert schedule["retention-prune"]["schedule"] == crontab(minute=27)
    assert schedule["promotion-eval"]["schedule"] == crontab(hour=4, minute=45)
    # The tasks the entries name are the ones their tests run (tests/privacy/test_retention.py, the hourly task;
    # tests/memory/test_promotion_eval.py, the daily task).
    assert schedule["retention-prune"]["task"] == privacy_tasks.retention_prune_task.name
    assert schedule["promotion-eval"]["task"] == memory_tasks.promotion_eval_task.name


@pytest.mark.django_db(transaction=True)  # the scheduler manages its own connection
def test_beat_loads_every_entry_into_the_database_scheduler():
    DatabaseScheduler(app=current_app)  # what `celery beat` builds at start-up: it syncs the configured entries
    stored = {task.name: task for task in PeriodicTask.objects.all()}
    for entry, (task, _) in EXPECTED.items():
        assert entry in stored, entry
        assert (stored[entry].task, stored[entry].enabled) == (task.name, True), entry
    assert stored["retention-prune"].crontab is not None
    assert (stored["retention-prune"].crontab.minute, stored["retention-prune"].crontab.hour) == ("27", "*")
    assert (stored["promotion-eval"].crontab.minute, stored["promotion-eval"].crontab.hour) == ("45", "4")
