"""Drill: Redis freezes (SIGSTOP) while a real worker's embedding drain is mid-batch, and the drain fails. Once Redis
answers again, the tenant's next write is embedded within seconds and found by semantic recall: the failed drain's
flag neither outlives it (loopmem.embedding.work_queue) nor leaves the writes behind it to the 5-minute sweep.

Two freezes: one shorter than the flag's life (the drain waits, then its retry takes over) and one longer (the flag
lapses under the frozen Redis, and the next write sends a drain of its own). The worker and the Celery broker use
the drill's own redis-server (tests/faults/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from loopmem.embedding import work_queue
from loopmem.redis import outage
from loopmem.tenancy.services import tenant_set_provider
from memory.models import Memory
from tests.e2e.test_worker import _wait_for
from tests.e2e.test_worker_killed import EmbeddingsServer, start_worker, stop
from tests.faults.conftest import DrillRedis
from tests.memory.conftest import heavy_db

pytestmark = [pytest.mark.faults, heavy_db]

BACK_WITHIN_SECONDS = 5  # from Redis answering again to the next write's vector being stored (a hang check)
FREEZES = {
    # Long enough for the drain to fail (its Redis calls time out after LOOPMEM_REDIS_TIMEOUT_SECONDS).
    "shorter than the flag's life": 2.0,
    # Past the flag's life counted from the freeze (its last renewal came before): it lapses under the frozen Redis.
    "longer than the flag's life": work_queue.FLAG_TTL_SECONDS + 1.5,
}


@pytest.fixture
def provider(tenant: Any) -> Iterator[EmbeddingsServer]:
    """The tenant's embedding provider: a loopback server whose first call hangs until released."""
    with EmbeddingsServer().running() as server:
        tenant_set_provider(
            tenant=tenant, embedding="openai", embedding_base_url=server.url, embedding_api_key="sk-t",
            embedding_model="m",
        )  # fmt: skip
        yield server


def _write(agent: Any, text: str) -> str:
    answer = agent.post("/api/v1/memory", {"text": text}, format="json")
    assert answer.status_code == 201, answer.content
    return str(answer.json()["data"]["id"])


def _embedded(memory_id: str) -> bool:
    return Memory.objects.filter(id=memory_id, embedding__isnull=False).exists()


@pytest.mark.parametrize("freeze", FREEZES.values(), ids=FREEZES.keys())
def test_a_write_after_redis_froze_under_a_drain_is_embedded_within_seconds_of_its_return(
    agent: Any, drill_redis: DrillRedis, provider: EmbeddingsServer, freeze: float
) -> None:
    worker = start_worker()
    try:
        _write(agent, "the drain that Redis froze under was embedding this")
        if not provider.first_call.wait(timeout=45):
            pytest.fail(f"the worker never started the drain:\n{stop(worker)}")
        drill_redis.freeze()  # the drain is inside its provider call, its claim and flag in Redis
        provider.release.set()  # the batch is stored; the drain's next Redis call hangs and fails
        time.sleep(freeze)
        drill_redis.thaw()
        back = time.monotonic()
        outage.reset()  # this process did not call Redis meanwhile; the worker keeps its own latch

        memory_id = _write(agent, "the first write after Redis came back")
        embedded = _wait_for(lambda: _embedded(memory_id), BACK_WITHIN_SECONDS - (time.monotonic() - back))
        if not embedded:
            pytest.fail(f"the write was not embedded within {BACK_WITHIN_SECONDS} s; the worker said:\n{stop(worker)}")
    finally:
        output = stop(worker)
    assert "TimeoutError" in output, output  # the drain did fail under the frozen Redis
    body = agent.post("/api/v1/memory/recall", {"query": "the first write after Redis came back"}, format="json")
    assert body.json()["meta"]["fallback"] is False
    assert body.json()["data"][0]["memory"]["id"] == memory_id
