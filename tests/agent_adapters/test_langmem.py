"""LangMem's own memory tools, unchanged, on LoopmemStore: create, update and delete through the manage tool,
found again through the search tool, in the namespace LangMem templates from the run's config."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

pytest.importorskip("langmem")

from langmem import create_manage_memory_tool, create_search_memory_tool  # type: ignore[import-untyped]

from agent.langgraph_store import LoopmemStore
from tests.agent_adapters.conftest import Keys, live_db

pytestmark = live_db

CONFIG = {"configurable": {"langgraph_user_id": "user-7"}}
NAMESPACE = ("memories", "{langgraph_user_id}")


def test_langmem_tools_round_trip_on_the_store(keys: Keys, connect: Callable[..., LoopmemStore]) -> None:
    store = connect(keys.key("coder-1"))
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    created = manage.invoke({"content": "The user's cat is called Miso", "action": "create"}, CONFIG)
    memory_key = created.split("created memory ")[-1].strip()
    [hit] = json.loads(search.invoke({"query": "cat Miso"}, CONFIG))
    assert (hit["namespace"], hit["key"]) == (["memories", "user-7"], memory_key)
    assert hit["value"] == {"content": "The user's cat is called Miso"}

    manage.invoke({"content": "The user's cat is called Mochi", "action": "update", "id": memory_key}, CONFIG)
    [hit] = json.loads(search.invoke({"query": "cat"}, CONFIG))
    assert hit["value"] == {"content": "The user's cat is called Mochi"}
    assert hit["created_at"] < hit["updated_at"]  # a correction: the first version's time stays

    manage.invoke({"action": "delete", "id": memory_key}, CONFIG)
    assert json.loads(search.invoke({"query": "cat"}, CONFIG)) == []
    assert store.get(("memories", "user-7"), memory_key) is None


def test_langmem_async_tools_use_abatch(keys: Keys, connect: Callable[..., LoopmemStore]) -> None:
    import asyncio

    store = connect(keys.key("coder-1"))
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    async def run() -> list[dict[str, object]]:
        await manage.ainvoke({"content": "Standups are at 09:30", "action": "create"}, CONFIG)
        return list(json.loads(await search.ainvoke({"query": "standups"}, CONFIG)))

    [hit] = asyncio.run(run())
    assert hit["value"] == {"content": "Standups are at 09:30"}
