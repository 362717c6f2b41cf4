"""The Celery app. Tasks are discovered from installed apps; the beat schedule is one dict in code."""

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("loopmem")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Loaded into django-celery-beat's DatabaseScheduler at beat start-up. Each entry: what runs, and why then.
app.conf.beat_schedule = {
    # A write whose embedding task was lost (Redis down, worker killed) is embedded within 5 minutes.
    "memory-embedding-sweep": {"task": "memory.tasks.embedding_sweep_task", "schedule": crontab(minute="*/5")},
    # Expired session turns are invisible at once; hourly is enough to reclaim their space.
    "session-prune": {"task": "memory.tasks.prune_session_turns_task", "schedule": crontab(minute=17)},
    # Hourly (< the 90 min sweep window < the 2 h TTL): every session is compiled before its turns expire.
    "promotion-sweep": {"task": "memory.tasks.promotion_sweep_task", "schedule": crontab(minute=7)},
    # Hourly: access-ledger rows and finished promotion jobs past their retention go, query texts sooner.
    "retention-prune": {"task": "privacy.tasks.retention_prune_task", "schedule": crontab(minute=27)},
    # Hourly: memories recalled often enough graduate into owner-visible knowledge.
    "graduation-sweep": {"task": "memory.tasks.graduation_sweep_task", "schedule": crontab(minute=37)},
    # Daily, quiet hours: promotion-quality figures per tenant LLM (calibration, never a gate).
    "promotion-eval": {"task": "memory.tasks.promotion_eval_task", "schedule": crontab(hour=4, minute=45)},
    # An article whose embedding task was lost, or whose provider was down, is embedded within 5 minutes.
    "knowledge-embedding-sweep": {
        "task": "knowledge.tasks.article_embedding_sweep_task",
        "schedule": crontab(minute="2-59/5"),  # offset from the memory sweep so the two do not burst together
    },
    # Daily at 04:30 UTC: yesterday's retrieval funnel, once the 30 min follow-through window past midnight closed.
    "knowledge-retrieval-metrics": {
        "task": "knowledge.tasks.retrieval_metrics_task",
        "schedule": crontab(hour=4, minute=30),
    },
}
