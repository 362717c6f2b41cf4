"""Services enqueue tasks by name (no import of `tasks`): every name they send must be a registered task."""

from __future__ import annotations

import pytest
from celery import current_app

from knowledge.services import EMBED_ARTICLE_TASK
from memory.promotion.jobs import PROMOTE_SESSION_TASK
from memory.services import BUMP_RECALL_COUNTS_TASK, EMBED_MEMORY_TASK, EMBED_PENDING_MEMORIES_TASK


@pytest.mark.parametrize(
    "name",
    [EMBED_MEMORY_TASK, EMBED_PENDING_MEMORIES_TASK, BUMP_RECALL_COUNTS_TASK, PROMOTE_SESSION_TASK, EMBED_ARTICLE_TASK],
)
def test_every_enqueued_name_is_a_registered_task(name: str) -> None:
    current_app.loader.import_default_modules()
    assert name in current_app.tasks
