"""Export (NDJSON, streamed) and import (NDJSON or a JSON array): a round trip into a fresh subject, idempotent
re-import, the quota stopping an import at the right line, and the management commands."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from loopmem.tenancy.services import tenant_halt
from memory.models import Memory
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.memory.conftest import remember

pytestmark = pytest.mark.django_db

EXPORT = "/api/v1/memory/export"
IMPORT = "/api/v1/memory/import"
CARRIED = ("text", "confidence", "tags", "metadata", "source_session_id")


def export(client, **params: Any) -> list[dict[str, Any]]:
    response = client.get(EXPORT, params)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    raw = b"".join(response.streaming_content).decode()
    assert raw == "" or raw.endswith("\n")
    return [json.loads(line) for line in raw.splitlines()]


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def import_(client, raw: bytes, content_type: str = "application/x-ndjson"):
    return client.post(IMPORT, raw, content_type=content_type)


def patch(client, memory_id, **fields):
    response = client.patch(f"/api/v1/memory/{memory_id}", fields, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["data"]


@pytest.fixture
def source_agent(agent):
    """agent-a with standalone memories and two supersede chains (one correcting only the confidence)."""
    remember(agent, "the cache is Redis 7", tags=["infra"], metadata={"port": 6379}, confidence=0.8)
    v1 = remember(agent, "we run Postgres 16", tags=["db"], metadata={"env": {"name": "prod"}}, source_session_id="s1")
    v2 = patch(agent, v1["id"], text="we moved to Postgres 17")
    patch(agent, v2["id"], tags=["db", "upgraded"])
    same = remember(agent, "deploys go out on Tuesdays", confidence=0.9)
    patch(agent, same["id"], confidence=0.4)  # the same text twice in one chain
    remember(agent, "ünïcödé and emoji 🚀 survive", metadata={"note": "line\nbreak"})
    return agent


def _chains(lines: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """Each chain as its versions' carried fields, oldest first (ids differ between subjects; contents do not)."""
    by_id = {line["id"]: line for line in lines}
    heads = [line for line in lines if line["superseded_by"] is None]
    chains = []
    for head in heads:
        chain = [head]
        while chain[0]["supersedes"] in by_id:
            chain.insert(0, by_id[chain[0]["supersedes"]])
        chains.append([tuple(json.dumps(v[f], sort_keys=True) for f in CARRIED) for v in chain])
    return sorted(chains)


def test_export_streams_ndjson_with_provenance_and_never_the_embedding(source_agent):
    live = export(source_agent)
    assert len(live) == 4
    assert all(line["superseded_by"] is None for line in live)
    everything = export(source_agent, include_superseded="true")
    assert len(everything) == 7
    first = everything[0]
    assert set(first) == {
        "id",
        "tier",
        "tenant_id",
        "subject_id",
        "project_id",
        "text",
        "confidence",
        "source",
        "source_session_id",
        "tags",
        "metadata",
        "superseded_by",
        "inserted_at",
        "updated_at",
        "supersedes",
    }
    # Oldest first, and each correction names what it superseded.
    assert [line["inserted_at"] for line in everything] == sorted(line["inserted_at"] for line in everything)
    by_id = {line["id"]: line for line in everything}
    for line in everything:
        if line["supersedes"] is not None:
            assert by_id[line["supersedes"]]["superseded_by"] == line["id"]


def test_an_export_imported_into_a_fresh_subject_reproduces_it_field_by_field(
    source_agent, client_for, make_key, tenant
):
    original = export(source_agent, include_superseded="true")
    fresh = client_for(make_key("agent", tenant, agent_id="agent-fresh"))

    response = import_(fresh, ndjson(original))

    assert response.status_code == 200, response.json()
    assert response.json() == {"data": {"lines": 7, "created": 7, "skipped": 0, "linked": 3}}
    copied = export(fresh, include_superseded="true")
    assert _chains(copied) == _chains(original)
    assert {line["subject_id"] for line in copied} == {"agent-fresh"}
    assert {line["source"] for line in copied} == {"imported"}
    # The live memories are the same too.
    assert sorted(line["text"] for line in export(fresh)) == sorted(line["text"] for line in export(source_agent))


def test_importing_twice_adds_nothing(source_agent, client_for, make_key, tenant):
    raw = ndjson(export(source_agent, include_superseded="true"))
    fresh = client_for(make_key("agent", tenant, agent_id="agent-fresh"))
    assert import_(fresh, raw).json()["data"]["created"] == 7
    again = import_(fresh, raw)
    assert again.json() == {"data": {"lines": 7, "created": 0, "skipped": 7, "linked": 0}}
    assert Memory.objects.filter(subject_id="agent-fresh").count() == 7
    # Importing a subject's own export into itself adds nothing either.
    assert import_(source_agent, raw).json()["data"]["created"] == 0
    assert Memory.objects.filter(subject_id="agent-a").count() == 7


def test_a_json_array_imports_too_and_live_only_exports_round_trip(source_agent, client_for, make_key, tenant):
    fresh = client_for(make_key("agent", tenant, agent_id="agent-fresh"))
    lines = export(source_agent)
    response = import_(fresh, json.dumps(lines).encode(), "application/json")
    assert response.json()["data"] == {"lines": 4, "created": 4, "skipped": 0, "linked": 0}
    assert _chains(export(fresh)) == _chains(lines)


def test_a_plain_remember_body_imports(agent):
    raw = b'{"text": "one"}\n\n{"text": "two", "tags": ["t"], "confidence": 0.5}\n'
    assert import_(agent, raw).json()["data"] == {"lines": 2, "created": 2, "skipped": 0, "linked": 0}
    assert sorted(Memory.objects.values_list("text", "source")) == [("one", "imported"), ("two", "imported")]


def test_source_is_imported_never_promoted(agent):
    raw = ndjson([{"text": "compiled from a session", "source": "promoted", "source_session_id": "s-9"}])
    import_(agent, raw)
    memory = Memory.objects.get()
    assert (memory.source, memory.source_session_id) == ("imported", "s-9")


def test_a_project_of_the_tenant_is_kept_any_other_imports_global(agent, tenant, other_tenant):
    mine, foreign = ProjectFactory.create(tenant=tenant), ProjectFactory.create(tenant=other_tenant)
    raw = ndjson([{"text": "mine", "project_id": str(mine.id)}, {"text": "foreign", "project_id": str(foreign.id)}])
    import_(agent, raw)
    assert dict(Memory.objects.values_list("text", "project_id")) == {"mine": mine.id, "foreign": None}


@override_settings(MEMORY_QUOTA=5)
def test_the_quota_stops_an_import_at_the_right_line_and_says_how_many_were_written(agent):
    remember(agent, "already here 1")
    remember(agent, "already here 2")
    lines = [{"text": "already here 1"}] + [{"text": f"new {n}"} for n in range(6)]

    response = import_(agent, ndjson(lines))

    assert response.status_code == 422
    body = response.json()["error"]
    assert body["code"] == "quota_exceeded"
    # Line 1 is held already; lines 2-4 fill the quota; line 5 is where it stopped.
    assert body["details"] == {
        "lines": 7,
        "created": 3,
        "skipped": 1,
        "linked": 0,
        "written": 3,
        "stopped_at_line": 5,
        "quota": 5,
    }
    assert "at line 5" in body["message"]
    assert "after writing 3 memories" in body["message"]
    assert sorted(Memory.objects.values_list("text", flat=True)) == [
        "already here 1",
        "already here 2",
        "new 0",
        "new 1",
        "new 2",
    ]
    # After forgetting two, the same file picks up where it stopped: what it holds is skipped.
    Memory.objects.filter(text__in=["already here 2", "new 0"]).delete()
    again = import_(agent, ndjson(lines)).json()["error"]["details"]
    assert (again["created"], again["skipped"], again["stopped_at_line"]) == (2, 3, 6)
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["already here 1", *(f"new {n}" for n in range(4))]


@override_settings(MEMORY_QUOTA=2)
def test_a_chain_counts_once_against_the_quota(agent):
    one, two, three = (f"00000000-0000-4000-8000-00000000000{n}" for n in range(1, 4))
    raw = ndjson(
        [
            {"id": one, "text": "v1", "superseded_by": two},
            {"id": two, "text": "v2", "superseded_by": three},
            {"id": three, "text": "v3"},
            {"text": "standalone"},
        ]
    )
    assert import_(agent, raw).json()["data"] == {"lines": 4, "created": 4, "skipped": 0, "linked": 2}
    assert Memory.objects.live().count() == 2


def test_a_partially_imported_chain_is_completed_and_linked(agent):
    ids = [f"00000000-0000-4000-8000-00000000000{n}" for n in range(1, 4)]
    chain = [
        {"id": ids[0], "text": "v1", "superseded_by": ids[1]},
        {"id": ids[1], "text": "v2", "superseded_by": ids[2], "supersedes": ids[0]},
        {"id": ids[2], "text": "v3", "supersedes": ids[1]},
    ]
    import_(agent, ndjson(chain[:2]))
    assert Memory.objects.live().get().text == "v2"
    assert import_(agent, ndjson(chain)).json()["data"] == {"lines": 3, "created": 1, "skipped": 2, "linked": 1}
    assert Memory.objects.live().get().text == "v3"
    head = Memory.objects.get(text="v3")
    history = [m["text"] for m in agent.get(f"/api/v1/memory/{head.id}/history").json()["data"]]
    assert history == ["v1", "v2", "v3"]


def test_a_bad_line_refuses_the_whole_import_naming_it(agent):
    raw = b'{"text": "fine"}\n{"text": ""}\n[1]\n{"text": "x", "confidence": 9, "superseded_by": "nope"}\n'
    response = import_(agent, raw)
    assert response.status_code == 422
    assert response.json()["error"]["details"] == {
        "line 2": {"text": ["This field may not be blank."]},
        "line 3": ["must be a JSON object"],
        "line 4": {
            "confidence": ["Ensure this value is less than or equal to 1.0."],
            "superseded_by": ["must be a canonical UUID"],
        },
    }
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("raw", "details"),
    [
        (b'{"text": "a"}\n{not json\n', {"line 2": ["not valid JSON"]}),
        (b'[{"text": "a"}', {"body": ["not a JSON array: Expecting ',' delimiter: line 1 column 15 (char 14)"]}),
        (b"\xff\xfe", {"body": ["must be UTF-8 text"]}),
        (
            b'{"id": "00000000-0000-4000-8000-000000000001", "text": "a"}\n'
            b'{"id": "00000000-0000-4000-8000-000000000001", "text": "b"}\n',
            {"line 2": {"id": ["appears on an earlier line"]}},
        ),
    ],
)
def test_a_body_that_is_not_ndjson_or_an_array_is_422(agent, raw, details):
    response = import_(agent, raw)
    assert (response.status_code, response.json()) == (
        422,
        error(422, "validation_failed", "Validation failed", details),
    )


def test_an_import_over_10_mb_is_413(agent):
    line = json.dumps({"text": "x" * 90_000}) + "\n"
    raw = (line * (10 * 1024 * 1024 // len(line) + 1)).encode()
    response = import_(agent, raw)
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")
    assert not Memory.objects.exists()


def test_an_import_between_2_5_and_10_mb_is_read(agent):
    line = json.dumps({"text": "y" * 90_000}) + "\n"
    raw = "".join(line.replace("yyy", f"{n:03d}", 1) for n in range(40)).encode()  # ~3.6 MB
    assert len(raw) > 2_621_440
    assert import_(agent, raw).json()["data"]["created"] == 40


@pytest.mark.parametrize("who", ["other_subject", "other_tenant_same_agent_id"])
def test_an_export_holds_only_the_callers_memories(who, source_agent, client_for, make_key, tenant, other_tenant):
    outsider = {
        "other_subject": lambda: client_for(make_key("agent", tenant, agent_id="agent-b")),
        "other_tenant_same_agent_id": lambda: client_for(make_key("agent", other_tenant, agent_id="agent-a")),
    }[who]()
    remember(outsider, "the outsider's own")
    assert [line["text"] for line in export(outsider, include_superseded="true")] == ["the outsider's own"]


def test_a_halted_tenant_exports_but_cannot_import(source_agent, tenant):
    tenant_halt(tenant=tenant)
    assert len(export(source_agent)) == 4
    response = import_(source_agent, b'{"text": "x"}\n')
    assert (response.status_code, response.json()["error"]["code"]) == (503, "tenant_halted")


def test_export_answers_an_ndjson_accept_header(source_agent):
    response = source_agent.get(EXPORT, HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 200
    assert len(b"".join(response.streaming_content).splitlines()) == 4


# --- Management commands --------------------------------------------------------------------------------------


def test_the_commands_round_trip_a_subject(source_agent, tenant, tmp_path):
    path = tmp_path / "agent-a.ndjson"
    out = io.StringIO()
    call_command(
        "memory_export", "--tenant", "acme", "--subject", "agent-a", "--output", str(path), "--include-superseded",
        "--json", stdout=out,
    )  # fmt: skip
    assert json.loads(out.getvalue()) == {
        "tenant": "acme",
        "subject": "agent-a",
        "output": str(path),
        "include_superseded": True,
        "exported": 7,
    }
    out = io.StringIO()
    call_command("memory_import", "--tenant", "acme", "--subject", "agent-copy", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue()) == {
        "tenant": "acme",
        "subject": "agent-copy",
        "lines": 7,
        "created": 7,
        "skipped": 0,
        "linked": 3,
    }
    out = io.StringIO()
    call_command("memory_import", "--tenant", str(tenant.id), "--subject", "agent-copy", str(path), stdout=out)
    assert (
        out.getvalue().strip() == "imported 0 of 7 memories into agent-copy (acme); 7 already held, 0 supersede links"
    )
    exported = [json.loads(line) for line in path.read_text().splitlines()]
    out = io.StringIO()
    call_command("memory_export", "--tenant", "acme", "--subject", "agent-copy", "--include-superseded", stdout=out)
    assert _chains([json.loads(line) for line in out.getvalue().splitlines()]) == _chains(exported)


@override_settings(MEMORY_QUOTA=1)
def test_the_import_command_reports_the_quota_stop(tenant, tmp_path):
    path = tmp_path / "two.ndjson"
    path.write_text('{"text": "a"}\n{"text": "b"}\n')
    out = io.StringIO()
    with pytest.raises(CommandError, match="quota_exceeded: The subject's quota was reached at line 2"):
        call_command("memory_import", "--tenant", "acme", "--subject", "s", str(path), "--json", stdout=out)
    assert json.loads(out.getvalue())["error"]["details"]["written"] == 1


@override_settings(MEMORY_QUOTA=1)
def test_the_quota_stop_names_the_files_own_line(agent):
    response = import_(agent, b'\n{"text": "a"}\n\n\n{"text": "b"}\n')
    assert response.json()["error"]["details"]["stopped_at_line"] == 5
