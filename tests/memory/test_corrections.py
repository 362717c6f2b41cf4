"""Correcting a memory (PATCH), reading one (GET) and its history: a new version, never an edit."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test import override_settings

from loopmem.embedding.work_queue import Keys
from loopmem.redis.client import redis_client
from loopmem.tenancy.services import tenant_halt
from memory.models import Memory
from memory.writer import SubjectWriter
from tests.conftest import error
from tests.memory.conftest import embed_pending, remember

pytestmark = pytest.mark.django_db


def patch(client, memory_id, body):
    return client.patch(f"/api/v1/memory/{memory_id}", body, format="json")


def correct(client, memory_id, **fields):
    response = patch(client, memory_id, fields)
    assert response.status_code == 200, response.json()
    return response.json()["data"]


def history(client, memory_id):
    response = client.get(f"/api/v1/memory/{memory_id}/history")
    assert response.status_code == 200, response.json()
    return response.json()["data"]


def test_a_correction_writes_a_new_live_version_and_keeps_the_old_one(
    agent, tenant, sent_tasks, django_capture_on_commit_callbacks
):
    old = remember(agent, "we run Postgres 16", tags=["db"], metadata={"env": "prod"}, confidence=0.9)
    with django_capture_on_commit_callbacks(execute=True):
        new = correct(agent, old["id"], text="we moved to Postgres 17")

    assert new["id"] != old["id"]
    assert (new["text"], new["tags"], new["metadata"], new["confidence"]) == (
        "we moved to Postgres 17",
        ["db"],
        {"env": "prod"},
        0.9,
    )
    assert (new["source"], new["project_id"], new["superseded_by"]) == ("explicit", None, None)
    stored_old = Memory.objects.get(id=old["id"])
    assert (stored_old.text, str(stored_old.superseded_by_id)) == ("we run Postgres 16", new["id"])
    # Embedded like any write.
    assert sent_tasks == [("memory.tasks.embed_pending_memories_task", (str(tenant.id),))]
    assert redis_client().lrange(Keys("memories", tenant.id).pending, 0, -1) == [new["id"].encode()]
    # The list shows the live version only; include_superseded shows both.
    assert [m["id"] for m in agent.get("/api/v1/memory").json()["data"]] == [new["id"]]
    assert len(agent.get("/api/v1/memory?include_superseded=true").json()["data"]) == 2


def test_each_given_field_replaces_the_old_value_and_the_rest_carry_over(agent):
    old = remember(agent, "deploys go out on Tuesdays", tags=["ops", "deploy"], metadata={"team": "a"})
    new = correct(agent, old["id"], tags=["ops"], metadata={"team": "b"}, confidence=0.4)
    assert (new["text"], new["tags"], new["metadata"], new["confidence"]) == (
        "deploys go out on Tuesdays",
        ["ops"],
        {"team": "b"},
        0.4,
    )
    cleared = correct(agent, new["id"], tags=None, metadata=None)
    assert (cleared["tags"], cleared["metadata"]) == ([], {})


def test_get_returns_one_memory_live_or_superseded(agent):
    old = remember(agent, "the cache is Redis 6")
    new = correct(agent, old["id"], text="the cache is Redis 7")
    got_old = agent.get(f"/api/v1/memory/{old['id']}").json()["data"]
    assert (got_old["text"], got_old["superseded_by"]) == ("the cache is Redis 6", new["id"])
    assert agent.get(f"/api/v1/memory/{new['id']}").json() == {"data": new}


def test_history_is_the_whole_chain_oldest_first_whichever_member_is_asked(agent):
    first = remember(agent, "v1")
    second = correct(agent, first["id"], text="v2")
    third = correct(agent, second["id"], text="v3")
    other = remember(agent, "unrelated")

    expected = [first["id"], second["id"], third["id"]]
    for member in expected:
        assert [m["id"] for m in history(agent, member)] == expected
    assert [m["id"] for m in history(agent, other["id"])] == [other["id"]]
    assert [m["superseded_by"] for m in history(agent, first["id"])] == [second["id"], third["id"], None]


def test_forgetting_the_live_head_revives_its_predecessor(agent):
    first = remember(agent, "v1")
    second = correct(agent, first["id"], text="v2")
    assert agent.delete(f"/api/v1/memory/{second['id']}").status_code == 200
    assert agent.get(f"/api/v1/memory/{first['id']}").json()["data"]["superseded_by"] is None
    assert [m["id"] for m in agent.get("/api/v1/memory").json()["data"]] == [first["id"]]
    # And the revived row can be corrected again.
    assert correct(agent, first["id"], text="v2 again")["text"] == "v2 again"


def test_correcting_a_superseded_memory_is_409_naming_its_successor(agent):
    old = remember(agent, "v1")
    new = correct(agent, old["id"], text="v2")
    response = patch(agent, old["id"], {"text": "v2 bis"})
    assert (response.status_code, response.json()) == (
        409,
        error(
            409,
            "already_superseded",
            "The memory is already superseded by another memory",
            {"superseded_by": new["id"]},
        ),
    )
    assert Memory.objects.count() == 2


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({}, {"body": ["give at least one of text, confidence, tags, metadata"]}),
        (
            {"text": "x", "subject_id": "agent-b"},
            {"subject_id": ["unknown field: a correction takes text, confidence, tags, metadata"]},
        ),
        ({"text": ""}, {"text": ["This field may not be blank."]}),
        ({"confidence": 2}, {"confidence": ["Ensure this value is less than or equal to 1.0."]}),
        ({"confidence": True}, {"confidence": ["A valid number is required."]}),
        ({"tags": "ops"}, {"tags": ['Expected a list of items but got type "str".']}),
        ({"metadata": [1]}, {"metadata": ['Expected a dictionary of items but got type "list".']}),
    ],
)
def test_a_bad_correction_is_422_and_writes_nothing(agent, body, details):
    old = remember(agent, "v1")
    response = patch(agent, old["id"], body)
    assert (response.status_code, response.json()) == (
        422,
        error(422, "validation_failed", "Validation failed", details),
    )
    assert Memory.objects.count() == 1


def test_a_body_that_is_not_an_object_is_422(agent):
    old = remember(agent, "v1")
    response = patch(agent, old["id"], ["text"])
    assert response.status_code == 422


@pytest.mark.parametrize("who", ["other_subject", "other_tenant_same_agent_id"])
def test_another_subjects_or_tenants_memory_is_404_on_get_history_and_patch(
    who, agent, client_for, make_key, tenant, other_tenant
):
    secret = remember(agent, "the vault code is 4242")
    outsider = {
        "other_subject": lambda: client_for(make_key("agent", tenant, agent_id="agent-b")),
        "other_tenant_same_agent_id": lambda: client_for(make_key("agent", other_tenant, agent_id="agent-a")),
    }[who]()
    not_found = error(404, "not_found", "Not found")
    for response in (
        outsider.get(f"/api/v1/memory/{secret['id']}"),
        outsider.get(f"/api/v1/memory/{secret['id']}/history"),
        patch(outsider, secret["id"], {"text": "overwritten"}),
    ):
        assert (response.status_code, response.json()) == (404, not_found)
    assert Memory.objects.get().text == "the vault code is 4242"
    assert Memory.objects.count() == 1


@pytest.mark.parametrize("bad", ["nope", "00000000-0000-0000-0000-000000000000", "1234"])
def test_unknown_or_malformed_ids_are_404(agent, bad):
    for response in (
        agent.get(f"/api/v1/memory/{bad}"),
        agent.get(f"/api/v1/memory/{bad}/history"),
        patch(agent, bad, {"text": "x"}),
    ):
        assert response.status_code == 404


def test_a_superadmin_reads_any_memory_of_the_tenant_but_corrects_none(agent, client_for, superadmin_key, tenant):
    memory = remember(agent, "v1")
    operator = client_for(superadmin_key, impersonate=tenant.slug)
    assert operator.get(f"/api/v1/memory/{memory['id']}").json()["data"]["id"] == memory["id"]
    assert [m["id"] for m in operator.get(f"/api/v1/memory/{memory['id']}/history").json()["data"]] == [memory["id"]]
    assert patch(operator, memory["id"], {"text": "v2"}).status_code == 404


def test_a_halted_tenant_cannot_correct_but_can_read(agent, tenant):
    memory = remember(agent, "v1")
    tenant_halt(tenant=tenant)
    response = patch(agent, memory["id"], {"text": "v2"})
    assert (response.status_code, response.json()["error"]["code"]) == (503, "tenant_halted")
    assert agent.get(f"/api/v1/memory/{memory['id']}").status_code == 200
    assert agent.get(f"/api/v1/memory/{memory['id']}/history").status_code == 200


@override_settings(MEMORY_QUOTA=2)
def test_a_correction_at_the_quota_is_not_charged_twice(agent):
    first = remember(agent, "one")
    remember(agent, "two")
    assert agent.post("/api/v1/memory", {"text": "three"}, format="json").status_code == 422
    assert correct(agent, first["id"], text="one, corrected")["text"] == "one, corrected"
    assert Memory.objects.live().count() == 2


def test_the_project_and_source_are_kept(agent, tenant):
    from tests.factories import ProjectFactory

    project = ProjectFactory.create(tenant=tenant)
    old = remember(agent, "v1", project_id=str(project.id))
    Memory.objects.filter(id=old["id"]).update(source="promoted", source_session_id="s-1")
    new = correct(agent, old["id"], confidence=0.5)
    assert (new["project_id"], new["source"], new["source_session_id"]) == (str(project.id), "promoted", "s-1")


def test_a_promoted_memory_corrected_with_the_same_text_embeds(agent):
    # One live promoted row per content: the superseded version no longer counts, so the new one can be embedded.
    old = remember(agent, "the runner image is pinned")
    embed_pending()
    Memory.objects.filter(id=old["id"]).update(source="promoted")
    new = correct(agent, old["id"], tags=["ci"])
    assert embed_pending() == 1
    stored = Memory.objects.get(id=new["id"])
    assert stored.embedding_content_hash == Memory.objects.get(id=old["id"]).embedding_content_hash


# --- Two corrections at once --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_of_two_concurrent_corrections_exactly_one_wins_the_other_is_409(agent, monkeypatch):
    old = remember(agent, "v1")
    first_inside = threading.Event()
    insert = SubjectWriter.insert

    def slow_insert(*args, **kwargs):
        # The first writer holds its transaction open after writing its version: the second must wait on the
        # database (subject lock, row lock), then see the link and lose. Without that it would also write.
        memory = insert(*args, **kwargs)
        if not first_inside.is_set():
            first_inside.set()
            time.sleep(0.5)
        return memory

    monkeypatch.setattr(SubjectWriter, "insert", slow_insert)
    answers: dict[str, object] = {}

    def correct_to(text: str) -> None:
        try:
            if text == "second":
                assert first_inside.wait(10)
            answers[text] = patch(agent, old["id"], {"text": text})
        finally:
            connection.close()

    threads = [threading.Thread(target=correct_to, args=(text,)) for text in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    first, second = answers["first"], answers["second"]
    assert first.status_code == 200, first.json()  # type: ignore[attr-defined]
    winner = first.json()["data"]["id"]  # type: ignore[attr-defined]
    assert second.status_code == 409, second.json()  # type: ignore[attr-defined]
    assert second.json()["error"]["details"] == {"superseded_by": winner}  # type: ignore[attr-defined]
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["first", "v1"]
    assert str(Memory.objects.get(text="v1").superseded_by_id) == winner


@pytest.mark.django_db(transaction=True)
def test_many_racing_corrections_leave_one_linear_chain(agent):
    old = remember(agent, "v1")
    racers = 6
    barrier = threading.Barrier(racers)
    codes: list[int] = []
    lock = threading.Lock()

    def racer(n: int) -> None:
        try:
            barrier.wait()
            response = patch(agent, old["id"], {"text": f"racer {n}"})
            with lock:
                codes.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(codes) == [200] + [409] * (racers - 1)
    assert Memory.objects.count() == 2
    assert Memory.objects.live().count() == 1
