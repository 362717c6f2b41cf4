"""Watching a promotion: GET /api/v1/memory/promote/:session_id answers the caller's last job for the session."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.fields import DateTimeField

from loopmem.tenancy.services import tenant_halt, tenant_set_provider
from memory.models import Memory, PromotionJob
from memory.promotion import jobs as promotion
from memory.promotion.compilers import Candidate, ExtractiveCompiler
from memory.promotion.distiller import TurnLike
from tests.conftest import error
from tests.memory.conftest import heavy_db

pytestmark = heavy_db

FACTS = [
    {"text": "Always reship expedited instead of refunding a lost package.", "confidence": 0.92, "tags": ["shipping"]},
    {"text": "Escalate to a human supervisor after two failed delivery attempts.", "confidence": 0.88},
    {"text": "It is raining outside today.", "confidence": 0.15},
]
CONVERSATION = (("user", "I always reship expedited instead of refunding."), ("assistant", "Noted."))
NOT_FOUND = error(404, "not_found", "No promotion of this session was found.")


@pytest.fixture
def llm_tenant(tenant, fake_llm):
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-test", llm_model="m")
    fake_llm.reply = json.dumps(FACTS)
    return tenant


def say(client: Any, *turns: tuple[str, str], session_id: str = "s-1") -> None:
    for role, content in turns:
        response = client.post(
            "/api/v1/memory",
            {"tier": "session", "session_id": session_id, "role": role, "content": content},
            format="json",
        )
        assert response.status_code == 201, response.json()


def promote(client: Any, session_id: str = "s-1") -> int:
    status: int = client.post("/api/v1/memory/promote", {"session_id": session_id}, format="json").status_code
    return status


def watch(client: Any, session_id: str = "s-1") -> Any:
    return client.get(f"/api/v1/memory/promote/{session_id}")


def job_data(client: Any, session_id: str = "s-1") -> dict[str, Any]:
    response = watch(client, session_id)
    assert response.status_code == 200, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def run_jobs() -> list[str]:
    return [
        promotion.promotion_run(job_id=str(job.id)).outcome
        for job in PromotionJob.objects.filter(state__in=PromotionJob.IN_FLIGHT).order_by("inserted_at")
    ]


def iso(value: Any) -> str | None:
    return None if value is None else DateTimeField().to_representation(value)


ZERO = {"candidates": 0, "gated_out": 0, "quarantined": 0, "deduplicated": 0, "superseded": 0, "written": 0}


# --- Each status -----------------------------------------------------------------------------------------------


def test_a_requested_promotion_is_pending_with_its_compiler_and_no_job_id(agent, llm_tenant):
    say(agent, *CONVERSATION)
    assert promote(agent) == 202

    response = watch(agent)

    job = PromotionJob.objects.get()
    assert response.status_code == 200
    assert response.json() == {
        "data": {
            "session_id": "s-1",
            "status": "pending",
            "compiler": "openai",
            "trigger": "explicit",
            "outcome": None,
            "attempts": 0,
            "counts": ZERO,
            "memory_ids": [],
            "inserted_at": iso(job.inserted_at),
            "started_at": None,
            "finished_at": None,
            "updated_at": iso(job.updated_at),
        }
    }


def test_while_the_compiler_runs_the_job_is_running(agent, tenant):
    say(agent, ("user", "We deploy with `make ship`, never on Fridays."), ("user", "I prefer answers in French."))
    promote(agent)
    seen: list[dict[str, Any]] = []

    class Watching(ExtractiveCompiler):
        def compile(self, turns: Sequence[TurnLike]) -> list[Candidate]:
            seen.append(job_data(agent))
            return super().compile(turns)

    promotion.promotion_run(job_id=str(PromotionJob.objects.get().id), compiler=Watching())

    [running] = seen
    assert (running["status"], running["compiler"], running["attempts"], running["finished_at"]) == (
        "running",
        "extractive",
        1,
        None,
    )
    assert running["started_at"] is not None
    assert job_data(agent)["status"] == "succeeded"


def test_a_finished_promotion_reports_its_counts_and_the_memories_it_wrote(agent, llm_tenant):
    say(agent, *CONVERSATION)
    promote(agent)
    run_jobs()

    data = job_data(agent)

    written = Memory.objects.filter(source="promoted")
    assert (data["status"], data["outcome"], data["compiler"], data["attempts"]) == (
        "succeeded",
        "promoted",
        "openai",
        1,
    )
    assert data["counts"] == {
        "candidates": 3,
        "gated_out": 1,
        "quarantined": 0,
        "deduplicated": 0,
        "superseded": 0,
        "written": 2,
    }
    assert sorted(data["memory_ids"]) == sorted(str(m.id) for m in written)
    assert data["started_at"] <= data["finished_at"]


def test_re_promoting_an_unchanged_session_is_skipped_unchanged(agent, llm_tenant, fake_llm):
    say(agent, *CONVERSATION)
    promote(agent)
    run_jobs()
    promote(agent)
    assert job_data(agent)["status"] == "pending"  # the newest job is the one watched

    run_jobs()

    data = job_data(agent)
    assert (data["status"], data["outcome"], data["counts"], data["memory_ids"]) == (
        "skipped_unchanged",
        "skipped_unchanged",
        ZERO,
        [],
    )
    assert len(fake_llm.requests) == 1


def test_a_failing_compile_is_pending_again_then_failed(agent, llm_tenant, fake_llm):
    fake_llm.status = 500
    say(agent, *CONVERSATION)
    promote(agent)

    run_jobs()
    retrying = job_data(agent)
    run_jobs()
    failed = job_data(agent)

    assert (retrying["status"], retrying["outcome"], retrying["attempts"]) == (
        "pending",
        "compile_retry:llm_provider_error_500",
        1,
    )
    assert (failed["status"], failed["outcome"], failed["attempts"]) == (
        "failed",
        "compile_failed:llm_provider_error_500",
        2,
    )
    assert failed["finished_at"] is not None


@override_settings(MEMORY_QUOTA=2)
def test_a_promotion_stopped_by_the_memory_quota_is_failed_with_what_it_wrote(agent, llm_tenant):
    agent.post("/api/v1/memory", {"text": "already here"}, format="json")
    say(agent, *CONVERSATION)
    promote(agent)
    run_jobs()

    data = job_data(agent)

    assert (data["status"], data["outcome"], data["counts"]["written"]) == ("failed", "quota_exceeded", 1)
    assert data["memory_ids"] == [str(Memory.objects.get(source="promoted").id)]


def test_a_refused_trigger_is_recorded_as_budget_exceeded_and_spends_no_budget(agent, llm_tenant, settings):
    settings.PROMOTION_BUDGET_PER_HOUR = 1
    say(agent, *CONVERSATION, session_id="first")
    say(agent, *CONVERSATION, session_id="second")
    assert promote(agent, "first") == 202

    assert promote(agent, "second") == 429
    refused = job_data(agent, "second")
    assert promote(agent, "second") == 429  # refused again: the same record, refreshed

    assert (refused["status"], refused["outcome"], refused["compiler"], refused["counts"]) == (
        "budget_exceeded",
        "budget_exceeded",
        "openai",
        ZERO,
    )
    assert refused["finished_at"] is not None
    assert PromotionJob.objects.filter(session_id="second").count() == 1
    # Refusals are neither in flight nor compiles: with room for one more, the refused session goes through.
    settings.PROMOTION_BUDGET_PER_HOUR = 2
    assert promote(agent, "second") == 202
    assert job_data(agent, "second")["status"] == "pending"


@override_settings(PROMOTION_BUDGET_PER_HOUR=1)
def test_a_job_the_worker_finds_over_budget_is_budget_exceeded(agent, llm_tenant, fake_llm):
    say(agent, *CONVERSATION)
    promote(agent)
    PromotionJob.objects.create(
        tenant=llm_tenant, subject_id="x", session_id="other", trigger="sweep", state="done", compiled_at=timezone.now()
    )

    assert run_jobs() == ["budget_exceeded"]

    assert job_data(agent)["status"] == "budget_exceeded"
    assert fake_llm.requests == []


# --- Isolation and errors --------------------------------------------------------------------------------------


def test_a_session_never_promoted_is_404(agent):
    say(agent, *CONVERSATION)

    response = watch(agent)

    assert (response.status_code, response.json()) == (404, NOT_FOUND)


def test_another_subjects_or_tenants_promotion_is_the_same_404(agent, client_for, make_key, tenant, other_tenant):
    say(agent, *CONVERSATION, session_id="private")
    promote(agent, "private")
    neighbour = client_for(make_key("agent", tenant, agent_id="agent-b"))
    stranger = client_for(make_key("agent", other_tenant, agent_id="agent-a"))  # same agent id, other tenant

    for outsider in (neighbour, stranger):
        response = watch(outsider, "private")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert job_data(agent, "private")["status"] == "pending"


def test_promoting_another_subjects_session_shows_only_the_callers_own_no_op(agent, client_for, make_key, tenant):
    say(agent, *CONVERSATION, session_id="private")
    promote(agent, "private")
    run_jobs()
    neighbour = client_for(make_key("agent", tenant, agent_id="agent-b"))

    assert promote(neighbour, "private") == 202
    run_jobs()

    # The neighbour sees its own job (its "private" session has no turns), never the owner's counts or ids.
    theirs = job_data(neighbour, "private")
    assert (theirs["status"], theirs["outcome"], theirs["counts"], theirs["memory_ids"]) == (
        "succeeded",
        "skipped_too_short",
        ZERO,
        [],
    )
    assert job_data(agent, "private")["counts"]["written"] == Memory.objects.count()


def test_an_over_long_session_id_is_422(agent):
    response = watch(agent, "s" * 201)

    assert (response.status_code, response.json()) == (
        422,
        error(422, "invalid_session_id", "`session_id` must be a string of at most 200 bytes (it is never truncated)."),
    )


def test_a_session_id_with_a_slash_and_spaces_is_one_session(agent, llm_tenant):
    say(agent, *CONVERSATION, session_id="team/a b")
    promote(agent, "team/a b")

    assert job_data(agent, "team%2Fa%20b")["session_id"] == "team/a b"
    assert job_data(agent, "team/a b")["session_id"] == "team/a b"


def test_a_halted_tenant_can_still_watch(agent, tenant, llm_tenant):
    say(agent, *CONVERSATION)
    promote(agent)
    tenant_halt(tenant=tenant)

    assert job_data(agent)["status"] == "pending"
