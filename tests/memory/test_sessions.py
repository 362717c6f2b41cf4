"""The session tier: append-only turns, server-governed expiry, history, prune (reference §1.2, §2.1, §4.15)."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from loopmem.params import NOT_BLANK_PATTERN
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_halt
from memory import selectors, session_tier
from memory.checks import promotion_ttl_invariant
from memory.models import SessionTurn
from tests.conftest import error
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

TTL, WINDOW = 7200, 5400


def append(client, content="hello", session_id="s-1", role="user", **fields):
    return client.post(
        "/api/v1/memory",
        {"tier": "session", "session_id": session_id, "role": role, "content": content, **fields},
        format="json",
    )


def history(client, session_id="s-1", query=""):
    response = client.get(f"/api/v1/memory/sessions/{session_id}{query}")
    assert response.status_code == 200, response.json()
    return response.json()


def _close(a: datetime, b: datetime, seconds: float = 5) -> bool:
    return abs((a - b).total_seconds()) < seconds


def test_append_answers_the_session_turn(agent, tenant):
    response = append(agent, metadata={"tool": "bash"})
    assert response.status_code == 201
    data = response.json()["data"]
    assert set(data) == {
        "id", "tier", "tenant_id", "subject_id", "project_id", "session_id", "role", "content", "metadata",
        "expires_at", "seq", "inserted_at",
    }  # fmt: skip
    assert (data["tier"], data["tenant_id"], data["subject_id"]) == ("session", str(tenant.id), "agent-a")
    assert (data["session_id"], data["role"], data["content"], data["metadata"]) == (
        "s-1",
        "user",
        "hello",
        {"tool": "bash"},
    )
    assert isinstance(data["seq"], int)


def test_seq_grows_with_every_append(agent):
    seqs = [append(agent, f"t{n}").json()["data"]["seq"] for n in range(3)]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 3


@pytest.mark.parametrize(
    ("body", "details"),
    [
        ({"role": "user", "content": "x"}, {"session_id": ["This field is required."]}),
        ({"session_id": "s", "content": "x"}, {"role": ["This field is required."]}),
        ({"session_id": "s", "role": "user"}, {"content": ["This field is required."]}),
        ({"session_id": "s", "role": "robot", "content": "x"}, {"role": ['"robot" is not a valid choice.']}),
        ({"session_id": "   ", "role": "user", "content": "x"}, {"session_id": ["must not be blank"]}),
        ({"session_id": "é" * 101, "role": "user", "content": "x"}, {"session_id": ["too long (max 200 bytes)"]}),
        ({"session_id": "s", "role": "user", "content": "x", "expires_at": "tomorrow"},
         {"expires_at": ["must be an ISO 8601 datetime, got 'tomorrow'"]}),
        ({"session_id": "s", "role": "user", "content": "x", "expires_at": 1700000000},
         {"expires_at": ["must be an ISO 8601 datetime, got 1700000000"]}),
        ({"session_id": "s", "role": "user", "content": "x", "metadata": "m"},
         {"metadata": ['Expected a dictionary of items but got type "str".']}),
    ],
)  # fmt: skip
def test_bad_turns_are_422_and_write_nothing(agent, body, details):
    response = agent.post("/api/v1/memory", {"tier": "session", **body}, format="json")
    assert response.status_code == 422
    assert response.json() == error(422, "validation_failed", "Validation failed", details)
    assert SessionTurn.objects.count() == 0


def test_content_is_capped_at_100000_bytes(agent):
    response = append(agent, "€" * 33_334)  # 100,002 bytes
    assert response.status_code == 422
    assert response.json()["error"]["details"] == {"content": ["exceeds maximum size of 100000 bytes (got 100002)"]}
    assert append(agent, "a" * 100_000).status_code == 201


def test_missing_or_empty_expires_at_is_now_plus_ttl(agent):
    for fields in ({}, {"expires_at": None}, {"expires_at": ""}):
        expires = datetime.fromisoformat(append(agent, **fields).json()["data"]["expires_at"])
        assert _close(expires, timezone.now() + timedelta(seconds=TTL))


def test_an_expiry_inside_the_sweep_window_is_floored(agent):
    soon = (timezone.now() + timedelta(seconds=10)).isoformat()
    expires = datetime.fromisoformat(append(agent, expires_at=soon).json()["data"]["expires_at"])
    assert _close(expires, timezone.now() + timedelta(seconds=WINDOW))
    past = (timezone.now() - timedelta(days=1)).isoformat()
    expires = datetime.fromisoformat(append(agent, expires_at=past).json()["data"]["expires_at"])
    assert _close(expires, timezone.now() + timedelta(seconds=WINDOW))


def test_a_later_expiry_is_kept_and_naive_times_are_utc(agent):
    later = datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    expires = append(agent, expires_at="2099-01-02T03:04:05").json()["data"]["expires_at"]
    assert datetime.fromisoformat(expires) == later


def test_history_is_in_insertion_order_with_paging(agent):
    for n in range(5):
        append(agent, f"t{n}")
    append(agent, "other session", session_id="s-2")
    body = history(agent, query="?limit=2&offset=1")
    assert [t["content"] for t in body["data"]] == ["t1", "t2"]
    assert body["meta"] == {"total_count": 5, "limit": 2, "offset": 1, "outcome": "success"}


def test_same_timestamp_appends_are_ordered_by_seq(agent):
    for n in range(4):
        append(agent, f"t{n}")
    SessionTurn.objects.update(inserted_at=timezone.now())  # all four in one microsecond
    assert [t["content"] for t in history(agent)["data"]] == ["t0", "t1", "t2", "t3"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_get_distinct_ordered_seqs(tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="racer")

    def writer(n: int) -> None:
        try:
            for m in range(10):
                session_tier.session_append(scope=scope, session_id="s", role="user", content=f"{n}-{m}")
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    turns = list(selectors.session_turns(scope=scope, session_id="s"))
    assert len(turns) == 40
    assert len({t.seq for t in turns}) == 40
    for n in range(4):  # each writer's own turns stay in its order
        own = [t.content for t in turns if t.content.startswith(f"{n}-")]
        assert own == [f"{n}-{m}" for m in range(10)]


def test_expired_turns_are_invisible_before_the_prune_runs(agent):
    append(agent, "old")
    append(agent, "new")
    SessionTurn.objects.filter(content="old").update(expires_at=timezone.now() - timedelta(seconds=1))
    body = history(agent)
    assert [t["content"] for t in body["data"]] == ["new"]
    assert body["meta"]["total_count"] == 1


def test_prune_deletes_only_expired_turns_across_tenants_in_batches(tenant, other_tenant):
    past, future = timezone.now() - timedelta(minutes=1), timezone.now() + timedelta(hours=1)
    turns = [
        SessionTurn(tenant=t, subject_id="a", session_id="s", role="user", content="x", expires_at=when)
        for t in (tenant, other_tenant)
        for when in [past] * 1250 + [future] * 3
    ]
    SessionTurn.objects.bulk_create(turns)
    assert session_tier.session_prune(batch_size=1000) == 2500
    assert SessionTurn.objects.count() == 6
    assert not SessionTurn.objects.filter(expires_at__lt=timezone.now()).exists()


def test_run_sweep_prune(tenant, capsys):
    SessionTurn.objects.create(
        tenant=tenant, subject_id="a", session_id="s", role="user", content="x", expires_at=timezone.now()
    )
    call_command("run_sweep", "prune", "--json")
    assert json.loads(capsys.readouterr().out) == {"sweep": "prune", "deleted": 1}


def test_the_prune_task(tenant):
    from memory.tasks import prune_session_turns_task

    SessionTurn.objects.create(
        tenant=tenant, subject_id="a", session_id="s", role="user", content="x", expires_at=timezone.now()
    )
    assert prune_session_turns_task() == 1


def test_another_subject_or_tenant_reading_the_same_session_id_sees_nothing(
    agent, client_for, make_key, tenant, other_tenant
):
    append(agent, "private")
    outsiders = [
        make_key("agent", tenant, agent_id="agent-b"),
        make_key("agent", other_tenant, agent_id="agent-a"),
        make_key("orchestrator", tenant, agent_id="agent-a"),
    ]
    for key in outsiders:
        body = history(client_for(key))
        assert (body["data"], body["meta"]["total_count"], body["meta"]["outcome"]) == ([], 0, "empty")


def test_an_unknown_session_is_an_empty_200(agent):
    assert history(agent, "never-seen")["data"] == []


def test_an_over_long_session_id_in_the_path_is_422(agent):
    response = agent.get("/api/v1/memory/sessions/" + "x" * 201)
    assert response.status_code == 422
    assert response.json()["error"]["details"] == {"session_id": ["too long (max 200 bytes)"]}


def test_a_session_turn_may_belong_to_a_project_of_the_tenant(agent, tenant, other_tenant):
    project = ProjectFactory.create(tenant=tenant)
    assert append(agent, project_id=str(project.id)).json()["data"]["project_id"] == str(project.id)
    foreign = ProjectFactory.create(tenant=other_tenant)
    for project_id in (str(foreign.id), str(uuid.uuid4())):
        assert append(agent, project_id=project_id).json()["error"]["code"] == "invalid_project_id"


def test_a_halted_tenant_cannot_append_but_can_read(agent, tenant):
    append(agent, "before")
    tenant_halt(tenant=tenant)
    assert append(agent, "during").status_code == 503
    assert [t["content"] for t in history(agent)["data"]] == ["before"]


def test_session_reads_need_a_key(client_for):
    assert client_for().get("/api/v1/memory/sessions/s-1").status_code == 401


@pytest.mark.parametrize(
    ("interval", "window", "ttl", "ok"),
    [(3600, 5400, 7200, True), (5400, 5400, 7200, False), (3600, 7200, 7200, False), (7200, 5400, 3600, False)],
)
def test_the_system_check_refuses_a_broken_ttl_invariant(interval, window, ttl, ok):
    with override_settings(
        PROMOTION_SWEEP_INTERVAL_SECONDS=interval, PROMOTION_SWEEP_WINDOW_SECONDS=window, SESSION_TTL_SECONDS=ttl
    ):
        errors = promotion_ttl_invariant(None)
        assert (errors == []) is ok
        if not ok:
            assert errors[0].id == "memory.E001"
            with pytest.raises(SystemCheckError, match=r"memory\.E001"):
                call_command("check")


def test_a_session_id_with_a_slash_can_be_read_back(agent):
    append(agent, "x", session_id="proj/branch-7")
    assert [t["content"] for t in history(agent, "proj/branch-7")["data"]] == ["x"]


def test_the_schema_states_the_session_id_rule_on_the_body_and_the_paths(agent):
    schema = json.loads(agent.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)

    history = schema["paths"]["/api/v1/memory/sessions/{session_id}"]["get"]["parameters"]
    status = schema["paths"]["/api/v1/memory/promote/{session_id}"]["get"]["parameters"]
    for parameters in (history, status):
        [session_id] = [p for p in parameters if p["name"] == "session_id"]
        assert session_id["schema"]["pattern"] == NOT_BLANK_PATTERN
    turn = schema["components"]["schemas"]["SessionTurnBodyIn"]["properties"]["session_id"]
    assert turn["pattern"] == NOT_BLANK_PATTERN
