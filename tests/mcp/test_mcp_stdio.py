"""The MCP server as a coding agent runs it: a subprocess on real stdio, driven by the `mcp` SDK's own client,
against a live loopmem server."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from django.db import connections
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from memory import embedding
from memory.models import Memory, PromotionJob
from tests.conftest import error
from tests.factories import ProjectFactory
from tests.mcp.conftest import TOOLS, Agent, live_db, text_of


@asynccontextmanager
async def mcp_over_stdio(agent: Agent, errlog: Path) -> AsyncIterator[Client]:
    """`python -m agent.mcp_server` in a subprocess, connected over its stdin/stdout."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agent.mcp_server"], env=agent.env, cwd=errlog.parent
    )
    with errlog.open("w") as log:
        async with Client(stdio_client(params, errlog=log), read_timeout_seconds=20) as client:
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A successful call's result: the API's JSON body."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    body: dict[str, Any] = json.loads(text_of(result))
    return body


async def call_failing(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A failed call's result: the error envelope."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    body: dict[str, Any] = json.loads(text_of(result))
    return body


async def embed(memory_id: str) -> None:
    """What the embedding worker does after a write (tasks are called as functions in tests)."""

    def run() -> None:
        try:
            embedding.memory_embed(memory_id=memory_id)
        finally:
            connections.close_all()  # this worker thread's connection must not outlive the test

    await anyio.to_thread.run_sync(run)


@live_db
def test_the_tools_are_the_references_and_none_can_name_a_tenant_or_subject(agent, tenant, other_tenant, tmp_path):
    async def scenario() -> dict[str, Any]:
        async with mcp_over_stdio(agent, tmp_path / "mcp.log") as client:
            tools = (await client.list_tools()).tools
            assert {tool.name for tool in tools} == TOOLS
            for tool in tools:
                fields = set(tool.input_schema.get("properties", {}))
                assert not {f for f in fields if "tenant" in f or "subject" in f}, (tool.name, fields)
            # Stray scope arguments are not part of any schema and never reach the API.
            return await call(
                client,
                "memory_remember",
                text="The deploy key lives in the vault under prod/deploy",
                tenant_id=str(other_tenant.id),
                subject_id="someone-else",
            )

    created = anyio.run(scenario)

    assert created["data"]["tenant_id"] == str(tenant.id)
    assert created["data"]["subject_id"] == agent.subject_id
    assert Memory.objects.get().subject_id == agent.subject_id


@live_db
def test_an_agent_remembers_recalls_lists_promotes_and_forgets_over_stdio(agent, tenant, tmp_path):
    project = ProjectFactory.create(tenant=tenant, name="Shop", slug="shop", repo_url="git@github.com:acme/shop.git")
    session_id = "3f0c2a9e-8d2b-4c1e-9a57-6b2d1e0f4c83"

    async def scenario() -> None:
        async with mcp_over_stdio(agent, tmp_path / "mcp.log") as client:
            resolved = await call(client, "resolve_project", repo_url="https://github.com/acme/shop")
            assert resolved["data"]["id"] == str(project.id)

            remembered = await call(
                client,
                "memory_remember",
                text="The staging database is reset every Monday at 06:00 UTC",
                tags=["ops"],
                project_id=str(project.id),
            )
            memory = remembered["data"]
            assert (memory["tier"], memory["source"], memory["project_id"]) == (
                "long_term",
                "explicit",
                str(project.id),
            )
            await embed(memory["id"])

            recalled = await call(
                client, "memory_recall", query="when is the staging database reset", project_id=str(project.id)
            )
            assert [hit["memory"]["id"] for hit in recalled["data"]] == [memory["id"]]
            assert recalled["data"][0]["score"] > 0
            assert recalled["meta"]["fallback"] is False

            listed = await call(client, "memory_list", limit=10)
            assert [row["id"] for row in listed["data"]] == [memory["id"]]
            assert listed["meta"]["total_count"] == 1

            turn = await call(
                client,
                "memory_remember",
                tier="session",
                session_id=session_id,
                role="fact",
                content="CI runs on the self-hosted runner pool",
            )
            assert turn["data"]["session_id"] == session_id
            promoted = await call(client, "memory_promote", session_id=session_id)
            assert promoted == {"data": {"session_id": session_id, "status": "enqueued"}}

            forgotten = await call(client, "memory_forget", id=memory["id"])
            assert forgotten == {"data": {"id": memory["id"], "deleted": True}}
            again = await call(client, "memory_recall", query="when is the staging database reset")
            assert again["data"] == []
            # The API's own error body, verbatim.
            assert await call_failing(client, "memory_forget", id=memory["id"]) == error(404, "not_found", "Not found")

    anyio.run(scenario)

    job = PromotionJob.objects.get()
    assert (job.tenant_id, job.subject_id, job.session_id) == (tenant.id, agent.subject_id, session_id)
    assert not Memory.objects.exists()
    assert not agent.data_dir.exists(), "the MCP server loaded the Django settings (embedded servers)"


@live_db
def test_tool_errors_carry_the_code_and_message_and_no_trace(agent, tmp_path):
    async def scenario() -> None:
        async with mcp_over_stdio(agent, tmp_path / "mcp.log") as client:
            # Refused client-side: the id goes into the URL path.
            refused = await call_failing(client, "memory_forget", id="../projects")
            assert refused["error"]["code"] == "invalid_memory_id"
            assert refused["error"]["status"] is None
            # An argument outside the tool's schema is refused by the SDK before the tool runs.
            off_schema = await client.call_tool("memory_graduate", {"memory_id": str(uuid.uuid4()), "re_scope": "all"})
            assert off_schema.is_error
            assert "re_scope" in text_of(off_schema)
            bad_recall_id = await call_failing(client, "recall_referenced", recall_id="latest", article_ids=[])
            assert bad_recall_id["error"]["code"] == "invalid_recall_id"
            invalid = await call_failing(client, "memory_remember", text="x", project_id="not-a-uuid")
            assert invalid["error"]["code"] == "invalid_project_id"
            assert invalid["error"]["status"] == 422

    anyio.run(scenario)

    assert "Traceback" not in (tmp_path / "mcp.log").read_text()


@live_db
def test_recall_context_referenced_graduate_and_knowledge_search_over_stdio(agent, tenant, tmp_path):
    from tests.recall.conftest import article

    shared = article(tenant, "Deploy runbook", "How to deploy the shop and roll it back.")

    async def scenario() -> None:
        async with mcp_over_stdio(agent, tmp_path / "mcp.log") as client:
            memory = (await call(client, "memory_remember", text="Deploys of the shop need a green canary first"))[
                "data"
            ]
            await embed(memory["id"])

            merged = await call(client, "recall_context", query="how do I deploy the shop", session_id="task-9")
            sources = {item["source"] for item in merged["data"]}
            assert sources == {"memory", "knowledge"}
            recall_id = merged["meta"]["recall_id"]
            referenced = await call(client, "recall_referenced", recall_id=recall_id, article_ids=[str(shared.id)])
            assert referenced["data"]["recorded"] == 1

            found = await call(client, "knowledge_search", query="roll back", mode="keyword")
            assert [row["id"] for row in found["data"]] == [str(shared.id)]

            graduated = await call(client, "memory_graduate", memory_id=memory["id"])
            assert (graduated["data"]["verdict"], graduated["data"]["created"]) == ("created", True)
            assert graduated["data"]["article"]["visibility"] == "owner"

    anyio.run(scenario)
