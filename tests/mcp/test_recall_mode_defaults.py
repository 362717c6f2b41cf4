"""Our own surfaces lead (DESIGN §11): the typed client and the MCP tools recall memories in hybrid mode by default."""

from __future__ import annotations

import json

import anyio
from mcp.client.client import Client

from agent.client import LoopmemClient
from agent.mcp_server import build_server
from tests.mcp.conftest import live_db, text_of


@live_db
def test_the_client_finds_a_memory_the_moment_it_is_written(agent):
    """No worker runs in the suite: the memory is not embedded yet, and hybrid (the default) finds it by its words."""
    client = LoopmemClient(agent.url, agent.key)
    written = client.memory_remember(text="the staging database resets every Sunday at 02:00 UTC")["data"]
    body = client.memory_recall(query="when does the staging database reset")
    assert body["meta"]["mode"] == "hybrid"
    assert [hit["memory"]["id"] for hit in body["data"]] == [written["id"]]
    assert body["data"][0]["scores"]["semantic"] is None
    merged = client.recall_context(query="when does the staging database reset")
    assert merged["memory"]["meta"]["mode"] == "hybrid"
    assert [item["memory"]["id"] for item in merged["data"] if item["source"] == "memory"] == [written["id"]]


@live_db
def test_the_client_asks_for_another_mode_or_for_the_apis_default(agent):
    client = LoopmemClient(agent.url, agent.key)
    client.memory_remember(text="the staging database resets every Sunday")
    assert client.memory_recall(query="staging database", mode="keyword")["meta"]["mode"] == "keyword"
    default = client.memory_recall(query="staging database", mode=None)  # no mode sent: the API's semantic
    assert "mode" not in default["meta"]
    assert default["data"] == []  # semantic recall waits for the embedding


@live_db
def test_the_mcp_tools_default_to_hybrid(agent):
    server = build_server(LoopmemClient(agent.url, agent.key))

    async def scenario() -> tuple[str, str, str]:
        async with Client(server) as client:
            await client.call_tool("memory_remember", {"text": "the release train leaves on Tuesdays"})
            recalled = await client.call_tool("memory_recall", {"query": "release train"})
            merged = await client.call_tool("recall_context", {"query": "release train"})
            semantic = await client.call_tool("memory_recall", {"query": "release train", "mode": "semantic"})
            return text_of(recalled), text_of(merged), text_of(semantic)

    recalled, merged, semantic = anyio.run(scenario)
    assert json.loads(recalled)["meta"]["mode"] == "hybrid"
    assert json.loads(recalled)["meta"]["total_count"] == 1
    assert json.loads(merged)["memory"]["meta"]["mode"] == "hybrid"
    assert "mode" not in json.loads(semantic)["meta"]
