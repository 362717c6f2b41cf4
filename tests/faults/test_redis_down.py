"""Drill: Redis stopped, then frozen (SIGSTOP). Writes, recalls and session appends still answer, without a 5xx
and within a bounded time; every acknowledged write is in the database; once Redis is back, everything works
(and queues) again. Redis is the drill's own server (tests/faults/conftest.py), never the suite's."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from loopmem.redis import outage
from memory.models import Memory, SessionTurn
from tests.faults.conftest import DrillRedis, timed
from tests.memory.conftest import embed_pending, heavy_db

pytestmark = [pytest.mark.faults, heavy_db]


def _liveness_bound() -> float:
    # A hang check, not a performance assertion: a request may pay one Redis timeout per call it makes before the
    # outage latch opens (loopmem.redis.outage), and the machine may be busy. Three timeouts plus two seconds is
    # far above that and far below "hung until Redis comes back" (forever, in this drill).
    return 3 * settings.REDIS_TIMEOUT_SECONDS + 2


def _requests(agent: Any, n: int) -> dict[str, Any]:
    """One of each: remember, session append, memory recall, merged recall (with a session: recall history)."""
    return {
        "remember": lambda: agent.post("/api/v1/memory", {"text": f"drill fact {n}"}, format="json"),
        "session": lambda: agent.post(
            "/api/v1/memory",
            {"tier": "session", "session_id": "drill", "role": "user", "content": f"turn {n}"},
            format="json",
        ),
        "recall": lambda: agent.post("/api/v1/memory/recall", {"query": "drill fact"}, format="json"),
        "merged": lambda: agent.post("/api/v1/recall", {"query": "drill fact", "session_id": "drill"}, format="json"),
    }


def _drive(agent: Any, n: int) -> dict[str, Any]:
    answers = {}
    for name, call in _requests(agent, n).items():
        response, seconds = timed(call)
        assert response.status_code < 500, (name, response.status_code, response.content)
        assert seconds < _liveness_bound(), (name, seconds)
        answers[name] = response
    return answers


def _acknowledged(answers: dict[str, Any]) -> list[str]:
    assert answers["remember"].status_code == 201
    assert answers["session"].status_code == 201
    return [answers["remember"].json()["data"]["id"], answers["session"].json()["data"]["id"]]


def _assert_stored(ids: list[str]) -> None:
    memory_id, turn_id = ids
    assert Memory.objects.filter(id=memory_id).exists()
    assert SessionTurn.objects.filter(id=turn_id).exists()


@pytest.mark.parametrize("failure", ["stopped", "frozen"])
def test_requests_answer_in_bounded_time_and_writes_are_kept_while_redis_is_down(
    agent: Any, drill_redis: DrillRedis, failure: str
) -> None:
    _drive(agent, 0)  # warm: connections to the drill's Redis are open and pooled
    assert drill_redis.queued("embedding"), "a write enqueues its embedding while Redis is up"

    if failure == "stopped":
        drill_redis.stop()
    else:
        drill_redis.freeze()
    acknowledged = []
    for n in range(1, 4):
        answers = _drive(agent, n)
        acknowledged.append(_acknowledged(answers))
        assert answers["recall"].status_code == 200
        assert answers["merged"].status_code == 200
    for ids in acknowledged:
        _assert_stored(ids)
    ready, seconds = timed(agent.get, "/readyz")  # the probe tells the truth, promptly
    assert (ready.status_code, ready.json()["error"]["code"]) == (503, "not_ready")
    assert ready.json()["error"]["details"]["checks"]["database"] == "ok"
    assert seconds < _liveness_bound()

    if failure == "stopped":
        drill_redis.start()
    else:
        drill_redis.thaw()
    outage.reset()  # the latch would close by itself after LOOPMEM_REDIS_RETRY_AFTER_SECONDS
    answers = _drive(agent, 9)
    _assert_stored(_acknowledged(answers))
    # Writes made during the outage were not queued; the embedding sweep (every 5 min) embeds them. Run it.
    assert embed_pending() >= 4
    assert Memory.objects.filter(embedding__isnull=True).count() == 0
    body = agent.post("/api/v1/memory/recall", {"query": "drill fact 2"}, format="json").json()
    assert body["meta"]["fallback"] is False
    assert "drill fact 2" in [hit["memory"]["text"] for hit in body["data"]]


def test_the_latch_skips_redis_after_one_failure_and_retries_after_the_interval(
    drill_redis: DrillRedis, settings: Any
) -> None:
    settings.REDIS_RETRY_AFTER_SECONDS = 0.2
    drill_redis.freeze()
    calls = []

    def ping() -> bool:
        calls.append(1)
        from loopmem.redis.client import redis_client

        return bool(redis_client().ping())

    assert outage.call("test", ping, fallback=False) is False
    assert outage.call("test", ping, fallback=False) is False
    assert len(calls) == 1, "the second call is skipped while the latch is open"
    drill_redis.thaw()
    import time

    time.sleep(0.25)
    assert outage.call("test", ping, fallback=False) is True
    assert len(calls) == 2
    assert not outage.is_down(), "a call that reached Redis leaves the latch closed"
