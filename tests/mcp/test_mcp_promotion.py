"""Watching a promotion from the agent side: the typed client, and the MCP tools (memory_promote with wait,
memory_promotion_status), against the live server."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from agent import client as api
from agent.client import LoopmemClient
from agent.mcp_server import MAX_WAIT_SECONDS, bounded_wait, build_server
from memory.models import Memory, PromotionJob
from tests.conftest import error
from tests.mcp.conftest import live_db, text_of

SESSION = "team/a b"  # a slash and a space: one path segment, quoted by the client
NOT_FOUND = error(404, "not_found", "No promotion of this session was found.")


def say(agent: Any, *contents: str) -> None:
    client = LoopmemClient(agent.url, agent.key)
    for content in contents:
        client.memory_remember(tier="session", session_id=SESSION, role="user", content=content)


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    body: dict[str, Any] = json.loads(text_of(result))
    return bool(result.is_error), body


@live_db
def test_the_client_reads_the_job_and_waits_for_it_to_finish(agent, promotion_worker):
    say(agent, "We deploy with `make ship`, never on Fridays.", "I prefer answers in French.")
    client = LoopmemClient(agent.url, agent.key)
    with pytest.raises(api.NotFound) as never:
        client.memory_promotion(SESSION)
    assert never.value.envelope() == NOT_FOUND

    client.memory_promote(SESSION)
    finished = client.wait_for_promotion(SESSION, timeout=60)

    data = finished["data"]
    assert (data["session_id"], data["status"], data["compiler"], data["counts"]["written"]) == (
        SESSION,
        "succeeded",
        "extractive",
        2,
    )
    assert sorted(data["memory_ids"]) == sorted(str(m.id) for m in Memory.objects.all())
    assert client.memory_promotion(SESSION) == finished


@live_db
def test_waiting_without_a_worker_returns_the_pending_job_when_the_time_is_up(agent):
    say(agent, "We deploy with `make ship`, never on Fridays.", "I prefer answers in French.")
    client = LoopmemClient(agent.url, agent.key)
    client.memory_promote(SESSION)

    body = client.wait_for_promotion(SESSION, timeout=3, interval=0.5)

    assert body["data"]["status"] == "pending"
    assert PromotionJob.objects.get().state == "pending"


@live_db
def test_the_mcp_tools_promote_wait_and_report_the_job(agent, promotion_worker):
    say(agent, "We deploy with `make ship`, never on Fridays.", "I prefer answers in French.")
    server = build_server(LoopmemClient(agent.url, agent.key))

    async def scenario() -> list[tuple[bool, dict[str, Any]]]:
        async with Client(server) as client:
            return [
                await call(client, "memory_promotion_status", session_id=SESSION),
                await call(client, "memory_promote", session_id=SESSION, wait=True, wait_seconds=60),
                await call(client, "memory_promotion_status", session_id=SESSION),
                await call(client, "memory_promote", session_id=SESSION),
            ]

    before, waited, status, enqueued = anyio.run(scenario)

    assert before == (True, NOT_FOUND)
    assert waited[0] is False
    assert (waited[1]["data"]["status"], waited[1]["data"]["counts"]["written"]) == ("succeeded", 2)
    assert status == waited
    assert enqueued == (False, {"data": {"session_id": SESSION, "status": "enqueued"}})  # without wait: as before


def test_the_wait_is_bounded():
    assert (bounded_wait(None), bounded_wait(5), bounded_wait(-3), bounded_wait(10_000)) == (30, 5, 0, MAX_WAIT_SECONDS)
