"""Corrections, get, history and filters through the typed client and the MCP server (stdio), as an agent uses them."""

from __future__ import annotations

import anyio
import pytest

from agent import client as api
from agent.client import LoopmemClient, MemoryFilters
from memory.models import Memory
from tests.mcp.conftest import Agent, live_db
from tests.mcp.test_client import http_server, url_of  # noqa: F401  (fixture)
from tests.mcp.test_mcp_stdio import call, call_failing, embed, mcp_over_stdio


@live_db
def test_the_client_corrects_reads_history_batches_and_filters(agent: Agent):
    client = LoopmemClient(agent.url, agent.key)
    first = client.memory_remember(text="we run Postgres 16", tags=["db", "ops"], metadata={"env": "prod"})["data"]
    second = client.memory_correct(first["id"], text="we moved to Postgres 17")["data"]
    assert (second["text"], second["tags"], second["metadata"]) == (
        "we moved to Postgres 17",
        ["db", "ops"],
        {"env": "prod"},
    )
    assert client.memory_get(first["id"])["data"]["superseded_by"] == second["id"]
    assert [m["id"] for m in client.memory_history(second["id"])["data"]] == [first["id"], second["id"]]

    with pytest.raises(api.LoopmemAPIError) as stale:
        client.memory_correct(first["id"], text="again")
    assert (stale.value.status, stale.value.code, stale.value.details) == (
        409,
        "already_superseded",
        {"superseded_by": second["id"]},
    )
    with pytest.raises(api.InvalidArgument):
        client.memory_correct("../projects", text="x")

    batch = client.memory_batch([{"text": "CI uses the self-hosted pool", "tags": ["ci"]}, {"text": ""}])
    assert [item["status"] for item in batch["data"]] == [201, 422]

    listed = client.memory_list(filters=MemoryFilters(tags=["db", "ops"], metadata={"env": "prod"}))
    assert [m["id"] for m in listed["data"]] == [second["id"]]
    assert client.memory_list(filters=MemoryFilters(tags_any=["ci"], min_confidence=0.5))["meta"]["total_count"] == 1
    assert client.memory_list(filters=MemoryFilters(source="promoted"))["data"] == []
    recalled = client.memory_recall(query="postgres", filters=MemoryFilters(tags=["ci"]))
    assert recalled["meta"]["fallback"] is False
    with pytest.raises(api.ValidationFailed) as bad:
        client.memory_recall(query="postgres", filters=MemoryFilters(created_after="last week"))
    assert list(bad.value.details) == ["created_after"]
    # Event days: a memory that names none is about the day it was written (today).
    assert client.memory_list(filters=MemoryFilters(occurred_after="2000-01-01"))["meta"]["total_count"] >= 2
    assert client.memory_list(filters=MemoryFilters(occurred_before="2000-01-01"))["data"] == []


def test_filters_go_on_the_wire_as_the_api_reads_them(http_server):  # noqa: F811
    server = http_server
    filters = MemoryFilters(tags=["a", "b"], metadata={"k": 1}, created_after="2025-01-01", min_confidence=0.5)

    LoopmemClient(url_of(server), "lm_k").memory_list(limit=5, filters=filters)

    [(method, path, _)] = server.seen
    assert method == "GET"
    assert path == (
        "/api/v1/memory?tags=a&tags=b&metadata=%7B%22k%22%3A+1%7D&created_after=2025-01-01&min_confidence=0.5&limit=5"
    )
    assert MemoryFilters(tags=["a"], source="explicit").body() == {"tags": ["a"], "source": "explicit"}


@live_db
def test_an_agent_corrects_and_filters_over_stdio(agent: Agent, tmp_path):
    async def scenario() -> None:
        async with mcp_over_stdio(agent, tmp_path / "mcp.log") as client:
            old = (await call(client, "memory_remember", text="the staging db resets on Mondays", tags=["ops"]))["data"]
            new = (await call(client, "memory_correct", id=old["id"], text="the staging db resets on Sundays"))["data"]
            assert (new["text"], new["tags"]) == ("the staging db resets on Sundays", ["ops"])
            await embed(new["id"])
            got = await call(client, "memory_get", id=old["id"])
            assert got["data"]["superseded_by"] == new["id"]
            chain = await call(client, "memory_history", id=old["id"])
            assert [m["text"] for m in chain["data"]] == [old["text"], new["text"]]

            stale = await call_failing(client, "memory_correct", id=old["id"], confidence=0.5)
            assert (stale["error"]["code"], stale["error"]["details"]) == (
                "already_superseded",
                {"superseded_by": new["id"]},
            )
            unknown = await call_failing(client, "memory_get", id="nope")
            assert unknown["error"]["code"] == "invalid_memory_id"

            hits = await call(client, "memory_recall", query="when does staging reset", tags=["ops"])
            assert [h["memory"]["id"] for h in hits["data"]] == [new["id"]]
            none = await call(client, "memory_recall", query="when does staging reset", tags=["billing"])
            assert (none["data"], none["meta"]["outcome"]) == ([], "empty")
            merged = await call(client, "recall_context", query="when does staging reset", metadata={"x": 1})
            assert merged["memory"]["data"] == []
            listed = await call(client, "memory_list", tags=["ops"], include_superseded=True)
            assert listed["meta"]["total_count"] == 2
            bad = await call_failing(client, "memory_recall", query="x", min_confidence=3)
            assert list(bad["error"]["details"]) == ["min_confidence"]
            dated = await call(client, "memory_list", occurred_after="2000-01-01", occurred_before="2999-01-01")
            assert dated["meta"]["total_count"] == 1  # the live one, about the day it was written

    anyio.run(scenario)

    assert Memory.objects.count() == 2
    assert "Traceback" not in (tmp_path / "mcp.log").read_text()
