"""Isolation through every adapter: a namespace, session id or memory id naming another subject or tenant reaches
nothing, because the key alone decides whose memory a call reads and writes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("agents")

from agent.client import NotFound
from agent.httpx_client import AsyncClient, Client
from agent.langgraph_store import LoopmemStore
from agent.openai_agents import LoopmemSession
from tests.agent_adapters.conftest import Keys, live_db

pytestmark = live_db


def test_a_namespace_naming_another_subject_or_tenant_reaches_nothing(
    keys: Keys, connect: Callable[..., LoopmemStore]
) -> None:
    owner = connect(keys.key("coder-1"))
    owner.put(("memories", "coder-1"), "k", {"content": "coder-1's secret plan: ship on Monday"})
    tenant_id = str(keys.tenant.id)
    naming_the_owner = [
        ("memories", "coder-1"),
        ("memories",),
        ("tenant", tenant_id, "subject", "coder-1"),
        (tenant_id, "coder-1"),
    ]
    for intruder in (
        connect(keys.key("coder-2")),  # another subject of the tenant
        connect(keys.foreign("coder-1")),  # the same agent id in another tenant
    ):
        for namespace in naming_the_owner:
            assert intruder.get(namespace, "k") is None
            assert intruder.search(namespace, query="secret plan Monday") == []
            assert intruder.search(namespace) == []
        assert intruder.list_namespaces() == []
        intruder.delete(("memories", "coder-1"), "k")  # forgets nothing of the owner's
        intruder.put(("memories", "coder-1"), "k", {"content": "overwritten?"})  # writes the intruder's own
    item = owner.get(("memories", "coder-1"), "k")
    assert item is not None
    assert item.value == {"content": "coder-1's secret plan: ship on Monday"}


def test_a_session_or_memory_id_of_another_subject_reaches_nothing(keys: Keys) -> None:
    owner_key, intruder_key = keys.key("coder-1"), keys.foreign("coder-1")

    async def run() -> None:
        await LoopmemSession("shared-name", AsyncClient(keys.url, owner_key)).add_items(
            [{"role": "user", "content": "owner's turn"}]
        )
        intruder = LoopmemSession("shared-name", AsyncClient(keys.url, intruder_key))
        assert await intruder.get_items() == []
        assert await intruder.pop_item() is None

    asyncio.run(run())
    with Client(keys.url, owner_key) as owner, Client(keys.url, intruder_key) as intruder:
        mine = owner.memory_remember(text="owner's memory")["data"]
        with pytest.raises(NotFound):
            intruder.memory_correct(mine["id"], text="changed")
        with pytest.raises(NotFound):
            intruder.memory_forget(mine["id"])
        assert owner.memory_get(mine["id"])["data"]["text"] == "owner's memory"
