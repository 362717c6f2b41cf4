"""The Celery app. Tasks are discovered from installed apps; the beat schedule is one dict in code, built from
the interval settings (so the TTL system check validates the schedule that really runs)."""

import os
from typing import Any

from celery import Celery, signals
from celery.schedules import crontab
from django.core.signals import setting_changed
from django.dispatch import receiver

from loopmem.database import worker_connections
from loopmem.http import request_id
from loopmem.observability import worker_metrics
from loopmem.runtime import schedules

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("loopmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def beat_schedule() -> dict[str, dict[str, Any]]:
    """Loaded into django-celery-beat's DatabaseScheduler at beat start-up. Each entry: what runs, and why then.
    Every entry's task retries a database or Redis that fails for a moment (loopmem.runtime.task_retry)."""
    from django.conf import settings

    return {
        # A write whose embedding task was lost (Redis down, worker killed) is embedded within the interval (5 min).
        "memory-embedding-sweep": {
            "task": "memory.tasks.embedding_sweep_task",
            "schedule": schedules.every(settings.EMBEDDING_SWEEP_INTERVAL_SECONDS),
        },
        # Expired session turns are invisible at once; hourly (:17) is enough to reclaim their space.
        "session-prune": {
            "task": "memory.tasks.prune_session_turns_task",
            "schedule": schedules.every(settings.SESSION_PRUNE_INTERVAL_SECONDS, offset_minutes=17),
        },
        # Hourly (:07) by default; interval < sweep window < session TTL (system check memory.E001 reads this
        # entry): every session is compiled before its turns expire.
        "promotion-sweep": {
            "task": "memory.tasks.promotion_sweep_task",
            "schedule": schedules.every(settings.PROMOTION_SWEEP_INTERVAL_SECONDS, offset_minutes=7),
        },
        # Hourly (:27): access-ledger rows and finished promotion jobs past their retention go, query texts sooner.
        "retention-prune": {"task": "privacy.tasks.retention_prune_task", "schedule": crontab(minute=27)},
        # Hourly (:37): memories recalled often enough graduate into owner-visible knowledge.
        "graduation-sweep": {
            "task": "memory.tasks.graduation_sweep_task",
            "schedule": schedules.every(settings.GRADUATION_SWEEP_INTERVAL_SECONDS, offset_minutes=37),
        },
        # Daily, quiet hours: promotion-quality figures per tenant LLM (calibration, never a gate).
        "promotion-eval": {"task": "memory.tasks.promotion_eval_task", "schedule": crontab(hour=4, minute=45)},
        # An article whose embedding task was lost, or whose provider was down, is embedded within the interval;
        # offset by 2 minutes from the memory sweep so the two do not burst together.
        "knowledge-embedding-sweep": {
            "task": "knowledge.tasks.article_embedding_sweep_task",
            "schedule": schedules.every(settings.EMBEDDING_SWEEP_INTERVAL_SECONDS, offset_minutes=2),
        },
        # Daily at 04:30 UTC: yesterday's retrieval funnel, once the 30 min follow-through window past midnight closed.
        "knowledge-retrieval-metrics": {
            "task": "knowledge.tasks.retrieval_metrics_task",
            "schedule": crontab(hour=4, minute=30),
        },
    }


def _install_beat_schedule(sender: Celery, **_: Any) -> None:
    # After configuration, when Django settings are readable (config/__init__ imports this module first).
    sender.conf.beat_schedule = beat_schedule()


app.on_after_configure.connect(_install_beat_schedule, weak=False)


@receiver(setting_changed)
def _follow_interval_settings(setting: str, **_: Any) -> None:
    # The schedule follows its settings whenever they change (override_settings in tests).
    if setting.endswith("_INTERVAL_SECONDS"):
        app.conf.beat_schedule = beat_schedule()


# The request id travels in a message header and is bound around each task; a task keeps or closes its database
# connections by the rules of a web request; workers count their tasks.
signals.before_task_publish.connect(request_id.stamp_outgoing_task, weak=False)
signals.task_prerun.connect(request_id.bind_task_request_id, weak=False)
signals.task_postrun.connect(request_id.unbind_task_request_id, weak=False)
signals.task_prerun.connect(worker_connections.around_task, weak=False)
signals.task_postrun.connect(worker_connections.around_task, weak=False)
signals.task_prerun.connect(worker_metrics.task_started, weak=False)
signals.task_postrun.connect(worker_metrics.task_finished, weak=False)
signals.worker_init.connect(worker_metrics.serve_worker_metrics, weak=False)
signals.worker_process_shutdown.connect(worker_metrics.child_exited, weak=False)
