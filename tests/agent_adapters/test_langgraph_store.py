"""LoopmemStore as LangGraph's BaseStore, against the live service: a real graph remembers in one thread and
recalls in another; put is remember-or-correct, put None forgets every version; search is hybrid recall with
filters; items carry their times and score."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict

import httpx
import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from agent.client import LoopmemUnreachable
from agent.httpx_client import AsyncClient, Client
from agent.langgraph_store import LoopmemStore
from tests.agent_adapters.conftest import Keys, live_db

pytestmark = live_db


@pytest.fixture
def store(keys: Keys) -> Iterator[LoopmemStore]:
    # Closed: a kept-alive connection holds a live-server thread, and its database session, open.
    made = LoopmemStore.connect(keys.url, keys.key("coder-1"))
    yield made
    made.close()


class State(TypedDict, total=False):
    remember: str
    query: str
    recalled: list[str]


def memory_node(state: State) -> State:
    """Stores what it is told to remember, recalls what it is asked."""
    store = get_store()
    namespace = ("memories", "user-1")
    if state.get("remember"):
        store.put(namespace, str(uuid.uuid4()), {"content": state["remember"]})
    if state.get("query"):
        return {"recalled": [item.value["content"] for item in store.search(namespace, query=state["query"])]}
    return {}


def build_graph(store: LoopmemStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("memory", memory_node)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def test_a_graph_remembers_in_one_thread_and_recalls_in_another(store: LoopmemStore) -> None:
    graph = build_graph(store)
    graph.invoke({"remember": "The user prefers PostgreSQL 17 for new services"}, {"configurable": {"thread_id": "a"}})
    answer = graph.invoke({"query": "which PostgreSQL does the user prefer"}, {"configurable": {"thread_id": "b"}})
    assert answer["recalled"] == ["The user prefers PostgreSQL 17 for new services"]


def test_the_async_graph_uses_abatch(store: LoopmemStore) -> None:
    graph = build_graph(store)

    async def run() -> Any:
        await graph.ainvoke({"remember": "Releases are cut on Tuesdays"}, {"configurable": {"thread_id": "a"}})
        return await graph.ainvoke({"query": "when are releases cut"}, {"configurable": {"thread_id": "b"}})

    assert asyncio.run(run())["recalled"] == ["Releases are cut on Tuesdays"]


def test_put_on_an_existing_key_corrects_and_keeps_the_history(store: LoopmemStore, keys: Keys) -> None:
    store.put(("prefs",), "db", {"content": "Uses MySQL", "kind": "db"})
    first = store.get(("prefs",), "db")
    assert first is not None
    store.put(("prefs",), "db", {"content": "Uses PostgreSQL", "kind": "db"})
    item = store.get(("prefs",), "db")
    assert item is not None
    assert item.value == {"content": "Uses PostgreSQL", "kind": "db"}
    assert (item.namespace, item.key) == (("prefs",), "db")
    assert item.created_at == first.created_at
    assert item.updated_at > first.updated_at

    with Client(keys.url, keys.key("coder-1")) as client:
        [live] = client.memory_list()["data"]
        history = client.memory_history(live["id"])["data"]
    assert [version["text"] for version in history] == ["Uses MySQL", "Uses PostgreSQL"]


def test_put_none_forgets_every_version(store: LoopmemStore, keys: Keys) -> None:
    store.put(("prefs",), "editor", {"content": "vim"})
    store.put(("prefs",), "editor", {"content": "helix"})
    store.delete(("prefs",), "editor")
    assert store.get(("prefs",), "editor") is None  # not the corrected version brought back
    with Client(keys.url, keys.key("coder-1")) as client:
        assert client.memory_list(include_superseded=True)["data"] == []


def test_search_is_hybrid_recall_narrowed_by_prefix_and_filter(store: LoopmemStore) -> None:
    store.put(("memories", "u1"), "a", {"content": "Deploys go through ArgoCD", "topic": "ops"})
    store.put(("memories", "u1"), "b", {"content": "Deploys are frozen on Fridays", "topic": "policy"})
    store.put(("memories", "u2"), "c", {"content": "Deploys need two approvals", "topic": "ops"})

    hits = store.search(("memories", "u1"), query="deploys", filter={"topic": "ops"})
    assert [(hit.namespace, hit.key) for hit in hits] == [(("memories", "u1"), "a")]
    assert hits[0].score is not None
    assert {hit.key for hit in store.search(("memories",), query="deploys")} == {"a", "b", "c"}
    assert {hit.key for hit in store.search(("memories",), filter={"topic": {"$eq": "ops"}})} == {"a", "c"}
    ranked = [hit.key for hit in store.search(("memories", "u1"), query="deploys", limit=2)]
    assert sorted(ranked) == ["a", "b"]
    assert [hit.key for hit in store.search(("memories", "u1"), query="deploys", limit=1, offset=1)] == ranked[1:]
    with pytest.raises(ValueError, match="equality only"):
        store.search(("memories",), filter={"topic": {"$ne": "ops"}})

    assert store.list_namespaces() == [("memories", "u1"), ("memories", "u2")]
    assert store.list_namespaces(suffix=("u2",)) == [("memories", "u2")]
    assert store.list_namespaces(max_depth=1) == [("memories",)]


def test_a_project_store_sees_only_its_project(keys: Keys, store: LoopmemStore) -> None:
    user = keys._make_key("user", keys.tenant).raw_key
    with Client(keys.url, user) as admin:
        project = admin.project_create(name="Shop")["data"]
    scoped = LoopmemStore.connect(keys.url, keys.key("coder-1"), project_id=project["id"])
    scoped.put(("notes",), "n", {"content": "Shop uses Stripe"})
    store.put(("notes",), "n", {"content": "Global note"})
    scoped_item = scoped.get(("notes",), "n")
    scoped.close()
    global_item = store.get(("notes",), "n")
    assert scoped_item is not None
    assert global_item is not None
    assert scoped_item.value["content"] == "Shop uses Stripe"
    assert global_item.value["content"] == "Global note"


class Deletes(httpx.BaseTransport):
    """The live server, except for DELETEs: those after the first `allowed` are refused (never forwarded), and
    the answers of the first `lose` are lost (forwarded, done, and then a timeout)."""

    def __init__(self, *, allowed: int | None = None, lose: int = 0) -> None:
        self.real = httpx.HTTPTransport()
        self.allowed = allowed
        self.lose = lose
        self.deletes: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            self.deletes.append(request.url.path.rsplit("/", 1)[-1])
            if self.allowed is not None and len(self.deletes) > self.allowed:
                raise httpx.ConnectError("refused", request=request)
        response = self.real.handle_request(request)
        response.read()
        if request.method == "DELETE" and len(self.deletes) <= self.lose:
            raise httpx.ReadTimeout("lost", request=request)
        return response

    def close(self) -> None:
        self.real.close()


@contextlib.contextmanager
def store_over(keys: Keys, transport: httpx.BaseTransport) -> Iterator[LoopmemStore]:
    key = keys.key("coder-1")
    made = LoopmemStore(Client(keys.url, key, transport=transport), AsyncClient(keys.url, key))
    try:
        yield made
    finally:
        made.close()


def test_a_forget_cut_short_leaves_the_current_value_not_an_older_one(store: LoopmemStore, keys: Keys) -> None:
    for editor in ("vim", "helix", "zed"):
        store.put(("prefs",), "editor", {"content": editor})
    with store_over(keys, Deletes(allowed=1)) as cut_short, pytest.raises(LoopmemUnreachable):
        cut_short.delete(("prefs",), "editor")
    item = store.get(("prefs",), "editor")
    assert item is not None
    assert item.value == {"content": "zed"}  # not "helix" brought back by forgetting the newest first

    store.delete(("prefs",), "editor")
    assert store.get(("prefs",), "editor") is None


def test_a_forget_whose_answer_was_lost_is_sent_again(store: LoopmemStore, keys: Keys) -> None:
    store.put(("prefs",), "shell", {"content": "bash"})
    store.put(("prefs",), "shell", {"content": "fish"})
    transport = Deletes(lose=1)
    with store_over(keys, transport) as flaky:
        flaky.delete(("prefs",), "shell")
    assert transport.deletes[0] == transport.deletes[1]  # the lost one again, answered 404: done
    assert len(transport.deletes) == 3
    with Client(keys.url, keys.key("coder-1")) as client:
        assert client.memory_list(include_superseded=True)["data"] == []


def test_a_filter_on_a_list_or_an_object_is_equality_as_in_memory_store(store: LoopmemStore) -> None:
    values: dict[str, dict[str, Any]] = {
        "only-x": {"content": "Deploy note one", "labels": ["x"], "meta": {"lang": "py"}},
        "x-y": {"content": "Deploy note two", "labels": ["x", "y"], "meta": {"lang": "py", "v": 3}},
        "y-x": {"content": "Deploy note three", "labels": ["y", "x"], "meta": {"lang": "go"}},
    }
    reference = InMemoryStore()
    for key, value in values.items():  # "only-x" first: the oldest, behind two that merely contain its list
        store.put(("notes",), key, value)
        reference.put(("notes",), key, value)

    def keys_of(target: BaseStore, **search: Any) -> set[str]:
        return {item.key for item in target.search(("notes",), **search)}

    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"labels": ["x"]}, {"only-x"}),
        ({"labels": ["x", "y"]}, {"x-y"}),
        ({"labels": {"$eq": ["y", "x"]}}, {"y-x"}),
        ({"meta": {"$eq": {"lang": "py"}}}, {"only-x"}),
        ({"meta": {"lang": "py"}}, {"only-x", "x-y"}),  # without $eq, field by field (InMemoryStore's rule)
        ({"meta": {"lang": "py"}, "labels": []}, set()),
    ]
    for conditions, expected in cases:
        assert keys_of(reference, filter=conditions) == expected
        assert keys_of(store, filter=conditions) == expected, conditions
        assert keys_of(store, filter=conditions, query="deploy note") == expected, conditions
    # complete: the newest two contain ["x"] but are not equal to it; the equal one behind them still comes back
    assert [item.key for item in store.search(("notes",), filter={"labels": ["x"]}, limit=1)] == ["only-x"]
    assert [item.key for item in store.search(("notes",), filter={"labels": ["x"]}, query="deploy", limit=1)] == [
        "only-x"
    ]
