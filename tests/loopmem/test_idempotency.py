"""`Idempotency-Key` on POST /memory and POST /memory/batch (loopmem.http.idempotency, docs/api.md)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from loopmem.models import IdempotencyRecord
from memory.models import Memory, SessionTurn
from privacy.retention import retention_prune
from tests.conftest import error

pytestmark = pytest.mark.django_db

REPLAYED = "Idempotent-Replayed"


def remember(client: Any, body: dict[str, Any], key: str | None = "k-1") -> Any:
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post("/api/v1/memory", body, format="json", **headers)


def batch(client: Any, items: list[dict[str, Any]], key: str = "b-1") -> Any:
    return client.post("/api/v1/memory/batch", {"memories": items}, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_without_a_key_every_post_writes(agent: Any) -> None:
    assert remember(agent, {"text": "twice"}, key=None).status_code == 201
    again = remember(agent, {"text": "twice"}, key=None)
    assert again.status_code == 201
    assert REPLAYED not in again.headers
    assert Memory.objects.count() == 2
    assert IdempotencyRecord.objects.count() == 0


def test_a_retry_with_the_same_key_and_body_replays_the_first_answer(agent: Any) -> None:
    first = remember(agent, {"text": "the deploy runs at noon", "tags": ["ops"]})
    assert first.status_code == 201
    assert REPLAYED not in first.headers
    retry = remember(agent, {"tags": ["ops"], "text": "the deploy runs at noon"})  # key order does not matter
    assert retry.status_code == 201
    assert retry.headers[REPLAYED] == "true"
    assert retry.json() == first.json()
    assert Memory.objects.count() == 1


def test_a_session_turn_is_replayed_too(agent: Any) -> None:
    body = {"tier": "session", "session_id": "s-1", "role": "user", "content": "hello"}
    first, retry = remember(agent, body), remember(agent, body)
    assert (first.status_code, retry.status_code) == (201, 201)
    assert retry.json() == first.json()
    assert SessionTurn.objects.count() == 1


def test_the_same_key_with_another_body_is_422_and_writes_nothing(agent: Any) -> None:
    assert remember(agent, {"text": "first"}).status_code == 201
    response = remember(agent, {"text": "second"})
    assert response.status_code == 422
    assert response.json() == error(
        422,
        "idempotency_key_reused",
        "This Idempotency-Key was already used with a different request",
        {"operation": "remember"},
    )
    assert list(Memory.objects.values_list("text", flat=True)) == ["first"]


def test_a_key_used_on_the_single_write_cannot_be_replayed_on_the_batch(agent: Any) -> None:
    assert remember(agent, {"text": "first"}, key="shared").status_code == 201
    response = batch(agent, [{"text": "first"}], key="shared")
    assert (response.status_code, response.json()["error"]["code"]) == (422, "idempotency_key_reused")


def test_keys_are_scoped_to_the_subject_and_the_tenant(
    agent: Any, client_for: Any, make_key: Any, tenant: Any, other_tenant: Any
) -> None:
    colleague = client_for(make_key("agent", tenant, agent_id="agent-b"))
    stranger = client_for(make_key("agent", other_tenant, agent_id="agent-a"))
    for client in (agent, colleague, stranger):
        response = remember(client, {"text": "same key, same body"}, key="shared")
        assert response.status_code == 201
        assert REPLAYED not in response.headers
    assert Memory.objects.count() == 3
    assert IdempotencyRecord.objects.count() == 3


@pytest.mark.parametrize("key", ["", "has space", "é-accent", "x" * 256, "tab\there"])
def test_a_malformed_key_is_400_and_writes_nothing(agent: Any, key: str) -> None:
    response = remember(agent, {"text": "anything"}, key=key)
    assert response.status_code == 400
    assert response.json() == error(
        400,
        "invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces",
        {"max_length": 255},
    )
    assert Memory.objects.count() == 0


def test_an_error_answer_is_not_recorded_so_a_corrected_retry_is_evaluated(agent: Any) -> None:
    refused = remember(agent, {"text": ""})
    assert refused.status_code == 422
    assert IdempotencyRecord.objects.count() == 0
    again = remember(agent, {"text": ""})
    assert again.status_code == 422
    assert REPLAYED not in again.headers


def test_a_batch_is_replayed_whole(agent: Any) -> None:
    items = [{"text": "one"}, {"text": ""}, {"text": "three"}]
    first = batch(agent, items)
    assert first.status_code == 200
    assert first.json()["meta"] == {"created": 2, "failed": 1}
    retry = batch(agent, items)
    assert retry.headers[REPLAYED] == "true"
    assert retry.json() == first.json()
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["one", "three"]


def test_a_key_past_the_retention_window_is_new_and_the_sweep_prunes_it(agent: Any, tenant: Any) -> None:
    assert remember(agent, {"text": "old"}).status_code == 201
    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=25))
    reused = remember(agent, {"text": "new"})
    assert reused.status_code == 201
    assert REPLAYED not in reused.headers
    assert Memory.objects.count() == 2

    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=25))
    with override_settings(IDEMPOTENCY_RETENTION_SECONDS=24 * 3600):
        report = retention_prune()
    assert report.idempotency_records_deleted == 1
    assert IdempotencyRecord.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_write_once_and_all_get_the_same_answer(
    agent_key: Any, client_for: Any
) -> None:
    # Each thread has its own database connection; the unique (tenant, subject, key) makes the later ones wait
    # for the first transaction, then replay what it committed.
    threads, answers = 8, []
    start = threading.Barrier(threads)

    def send() -> None:
        client = client_for(agent_key)
        start.wait()
        try:
            answers.append(remember(client, {"text": "raced"}, key="race"))
        finally:
            connection.close()

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [a.status_code for a in answers] == [201] * threads
    assert len({a.json()["data"]["id"] for a in answers}) == 1
    assert sum(1 for a in answers if a.headers.get(REPLAYED) == "true") == threads - 1
    assert Memory.objects.filter(text="raced").count() == 1
