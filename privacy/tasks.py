"""Privacy's periodic work: the hourly retention prune."""

from __future__ import annotations

from dataclasses import asdict

from celery import shared_task
from celery.contrib.django.task import DjangoTask

from loopmem.runtime.task_retry import PERIODIC_TASK_OPTIONS
from privacy.retention import retention_prune


@shared_task(base=DjangoTask, **PERIODIC_TASK_OPTIONS)
def retention_prune_task() -> dict[str, int]:
    """Hourly: access-ledger rows and finished promotion jobs past LOOPMEM_RETENTION_DAYS, query texts past
    LOOPMEM_QUERY_TEXT_RETENTION_DAYS."""
    return asdict(retention_prune())
