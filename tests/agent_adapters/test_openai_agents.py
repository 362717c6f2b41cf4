"""The OpenAI Agents SDK over loopmem, against the live service: a Runner whose scripted model (the SDK's own
ScriptedModel, a Model implementation; no network) calls remember, recall, correct and forget; and
LoopmemSession as the SDK's Session on the append-only session tier."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from agent.httpx_client import AsyncClient, Client
from agent.openai_agents import LoopmemSession, memory_tools
from tests.agent_adapters.conftest import Keys, live_db

pytestmark = live_db

OFFLINE = RunConfig(tracing_disabled=True)


def tool_output(call: ModelCall, call_id: str) -> Any:
    """The JSON our tool returned for `call_id`, as the model sees it in its input."""
    [output] = [item["output"] for item in call.input if item.get("call_id") == call_id and "output" in item]
    return json.loads(output)


def test_a_runner_calls_remember_recall_correct_and_forget(
    keys: Keys, async_clients: Callable[[str], AsyncClient]
) -> None:
    key = keys.key("coder-1")
    memory_id: dict[str, str] = {}

    def after_remember(call: ModelCall) -> Any:
        memory_id["id"] = tool_output(call, "c1")["data"]["id"]
        return [function_call("recall", {"query": "build cache directory"}, call_id="c2")]

    def after_recall(call: ModelCall) -> Any:
        [hit] = tool_output(call, "c2")["data"]
        assert hit["memory"]["id"] == memory_id["id"]
        return [
            function_call("correct", {"memory_id": memory_id["id"], "text": "Build cache: /var/cache/b2"}, call_id="c3")
        ]

    def after_correct(call: ModelCall) -> Any:
        memory_id["corrected"] = tool_output(call, "c3")["data"]["id"]
        return [function_call("forget", {"memory_id": "not-a-uuid"}, call_id="c4")]

    def after_bad_forget(call: ModelCall) -> Any:
        assert tool_output(call, "c4")["error"]["code"] == "invalid_memory_id"  # the model reads the code
        return [function_call("forget", {"memory_id": memory_id["corrected"]}, call_id="c5")]

    model = ScriptedModel(
        [
            [function_call("remember", {"text": "Build cache: /var/cache/b1", "tags": ["build"]}, call_id="c1")],
            ModelStep.respond(after_remember),
            ModelStep.respond(after_recall),
            ModelStep.respond(after_correct),
            ModelStep.respond(after_bad_forget),
            [assistant_message("Done.")],
        ]
    )
    agent = Agent(name="coder", instructions="Use memory.", model=model, tools=memory_tools(async_clients("coder-1")))
    result = Runner.run_sync(agent, "Remember where the build cache is, then fix it.", run_config=OFFLINE)
    assert result.final_output == "Done."
    model.assert_complete()

    with Client(keys.url, key) as client:
        # forgetting the correction brought the first version back, as the API documents
        [live] = client.memory_list()["data"]
        assert (live["id"], live["text"], live["tags"]) == (memory_id["id"], "Build cache: /var/cache/b1", ["build"])


def test_the_session_keeps_a_conversation_and_pop_and_clear_append(
    keys: Keys, async_clients: Callable[[str], AsyncClient]
) -> None:
    key = keys.key("coder-1")
    session = LoopmemSession("chat-1", async_clients("coder-1"))
    model = ScriptedModel([[assistant_message("Hello Ada.")], [assistant_message("You are Ada.")]])
    agent = Agent(name="coder", model=model)

    Runner.run_sync(agent, "I am Ada.", session=session, run_config=OFFLINE)
    Runner.run_sync(agent, "Who am I?", session=session, run_config=OFFLINE)
    second_input = model.calls[1].input
    assert [item.get("content") for item in second_input if item.get("role") == "user"] == ["I am Ada.", "Who am I?"]

    async def pop_and_clear() -> tuple[Any, list[Any], list[Any]]:
        popped = await session.pop_item()
        after_pop = await session.get_items()
        await session.clear_session()
        return popped, after_pop, await session.get_items()

    popped, after_pop, after_clear = asyncio.run(pop_and_clear())
    assert popped is not None
    assert popped["role"] == "assistant"
    assert len(after_pop) == 3
    assert after_pop[-1] == {"content": "Who am I?", "role": "user"}
    assert after_clear == []

    with Client(keys.url, key) as client:
        turns = client.session_history("chat-1")["data"]
    # append-only: the four items, the retraction and the clear marker are all still turns
    assert [turn["role"] for turn in turns] == ["user", "assistant", "user", "assistant", "system", "system"]
    assert turns[0]["content"] == "I am Ada."


def test_get_items_limit_returns_the_latest(keys: Keys, async_clients: Callable[[str], AsyncClient]) -> None:
    session = LoopmemSession("chat-2", async_clients("coder-1"))
    items: list[Any] = [{"role": "user", "content": f"message {n}"} for n in range(5)]

    async def run() -> list[Any]:
        await session.add_items(items)
        return await session.get_items(limit=2)

    assert asyncio.run(run()) == items[-2:]


def test_add_items_splits_batches_by_size_under_the_body_cap(
    keys: Keys, async_clients: Callable[[str], AsyncClient]
) -> None:
    # 60 items of 13 KB: 780 KB once, and each is kept twice (text and item), past the 1 MiB body cap in one batch
    session = LoopmemSession("chat-big", async_clients("coder-1"))
    items: list[Any] = [{"role": "user", "content": f"{n:03} " + "lorem ipsum " * 1100} for n in range(60)]

    async def run() -> list[Any]:
        await session.add_items(items)
        return await session.get_items()

    assert asyncio.run(run()) == items


def test_a_tool_output_over_the_body_cap_is_kept_cut_not_refused(
    keys: Keys, async_clients: Callable[[str], AsyncClient]
) -> None:
    session = LoopmemSession("chat-huge", async_clients("coder-1"))
    huge = "0123456789abcdef" * 80_000  # 1.28 MB: alone over the 1 MiB body cap
    items: list[Any] = [
        {"type": "function_call", "call_id": "c1", "name": "dump", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": huge},
        {"role": "assistant", "content": "Dumped."},
    ]

    async def run() -> list[Any]:
        await session.add_items(items)
        return await session.get_items()

    stored = asyncio.run(run())
    assert [stored[0], stored[2]] == [items[0], items[2]]
    output = stored[1]
    assert (output["type"], output["call_id"]) == ("function_call_output", "c1")
    assert huge.startswith(output["output"].removesuffix("\n[truncated]"))
    assert output["output"].endswith("\n[truncated]")
    assert len(json.dumps(output)) <= 200_000
    with Client(keys.url, keys.key("coder-1")) as client:
        turns = client.session_history("chat-huge")["data"]
    assert turns[1]["metadata"]["agents"]["truncated"] is True
    assert len(turns[1]["content"]) == 20_000  # what promotion reads
