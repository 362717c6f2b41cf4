"""Each task lands on its queue (embedding, promotion, sweeps, default), routed by name, so pools scale apart."""

from __future__ import annotations

import pytest
from celery import current_app
from django.conf import settings

EXPECTED = {
    "memory.tasks.embed_memory_task": "embedding",
    "memory.tasks.embed_pending_memories_task": "embedding",
    "knowledge.tasks.embed_article_task": "embedding",
    "memory.tasks.promote_session_task": "promotion",
    "memory.tasks.promotion_eval_task": "promotion",
    "memory.tasks.embedding_sweep_task": "sweeps",
    "knowledge.tasks.article_embedding_sweep_task": "sweeps",
    "memory.tasks.promotion_sweep_task": "sweeps",
    "memory.tasks.graduation_sweep_task": "sweeps",
    "memory.tasks.prune_session_turns_task": "sweeps",
    "knowledge.tasks.retrieval_metrics_task": "sweeps",
    "memory.tasks.bump_recall_counts_task": "default",
}


def queue_of(name: str) -> str:
    return str(current_app.amqp.router.route({}, name)["queue"].name)


@pytest.mark.parametrize(("name", "queue"), EXPECTED.items())
def test_a_task_routes_to_its_queue(name, queue):
    assert queue_of(name) == queue


def test_every_registered_task_routes_to_a_declared_queue():
    current_app.loader.import_default_modules()
    ours = [name for name in current_app.tasks if name.split(".")[0] in ("memory", "knowledge", "loopmem", "recall")]
    assert set(EXPECTED) <= set(ours)
    assert {queue_of(name) for name in ours} <= set(settings.CELERY_QUEUE_NAMES)


def test_a_worker_started_without_queues_consumes_all_of_them():
    assert set(current_app.amqp.queues) == set(settings.CELERY_QUEUE_NAMES)


def test_the_recall_bump_is_alone_on_its_queue():
    # Its queue's depth is the bump backlog RECALL_BUMP_MAX_TASKS bounds (memory.recall_bump._bump_admitted).
    from memory.recall_bump import BUMP_QUEUE, BUMP_RECALL_COUNTS_TASK

    current_app.loader.import_default_modules()
    ours = [name for name in current_app.tasks if name.split(".")[0] in ("memory", "knowledge", "loopmem", "privacy")]
    assert [name for name in ours if queue_of(name) == BUMP_QUEUE] == [BUMP_RECALL_COUNTS_TASK]
