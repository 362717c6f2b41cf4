"""The OpenAI Agents SDK over loopmem: memory function tools and a `Session` on the session tier.

`memory_tools(client)` gives an agent `remember`, `recall`, `correct` and `forget` (long-term memory, scoped by
the client's key). Each returns the API's JSON body as text; a refusal returns the API's error body
(`{"error": {status, code, message, details}}`) so the model can read the `code`, never a stack trace.

`LoopmemSession` keeps a conversation's items as session turns. The tier is append-only, so the two protocol
methods that remove things append instead:

- `pop_item()` appends a retraction turn naming the last visible turn, and returns that turn's item;
- `clear_session()` appends a clear marker; `get_items()` shows only what came after the newest marker.

Nothing is deleted: promotion still reads every turn, and the turns expire with the tier's TTL (2 h by default).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from agents import Tool, function_tool
from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from agent.client import JSONObject, LoopmemError, api_error
from agent.httpx_client import AsyncClient

MARK = "agents"
PAGE = 200  # the API's page limit for session history
BATCH = 100  # the API's batch limit
MAX_CONTENT_CHARS = 20_000  # a turn's text is what promotion reads; the item itself is kept in its metadata
# The item kept in a turn's metadata (what `get_items` returns) is at most this much JSON: past it, its longest
# strings are cut, because a body over the server's cap is refused whole.
MAX_ITEM_BYTES = 200_000
MAX_BODY_BYTES = 1_048_576  # the API's default body cap, LOOPMEM_MAX_REQUEST_BODY_BYTES
CUT_MARK = "\n[truncated]"
# What says what an item was, kept when even its cut strings are too much (countless small parts).
ITEM_IDENTITY = ("type", "role", "id", "call_id", "name", "status")


def memory_tools(client: AsyncClient, *, project_id: str | None = None) -> list[Tool]:
    """remember, recall, correct and forget as function tools acting as the client's key."""

    @function_tool
    async def remember(text: str, tags: list[str] | None = None) -> str:
        """Remember one durable fact for later sessions (a decision and its reason, a preference, a quirk).

        Args:
            text: The fact, self-contained and short. Never a secret or personal data.
            tags: Labels to filter on later, e.g. ["ops"].
        """
        return await _answer(lambda: client.memory_remember(text=text, tags=tags, project_id=project_id))

    @function_tool
    async def recall(query: str, limit: int = 5) -> str:
        """Recall your memories relevant to a query, by meaning and by the exact words, names and codes.

        Args:
            query: What you need to know.
            limit: How many memories at most (1-100).
        """
        return await _answer(lambda: client.memory_recall(query=query, limit=limit, project_id=project_id))

    @function_tool
    async def correct(memory_id: str, text: str) -> str:
        """Correct a memory that is wrong or outdated; the old version stays in its history.

        Args:
            memory_id: The memory's id, from remember or recall.
            text: The corrected fact.
        """
        return await _answer(lambda: client.memory_correct(memory_id, text=text))

    @function_tool
    async def forget(memory_id: str) -> str:
        """Forget a memory that should never have been stored. To fix a fact, use correct instead.

        Args:
            memory_id: The memory's id, from remember or recall.
        """
        return await _answer(lambda: client.memory_forget(memory_id))

    return [remember, recall, correct, forget]


async def _answer(call: Callable[[], Awaitable[JSONObject]]) -> str:
    # `call` builds the request inside the try: an argument refused before sending (a malformed id) is an error
    # body too.
    try:
        body = await call()
    except LoopmemError as exc:
        return json.dumps(exc.envelope())
    return json.dumps(body)


class LoopmemSession(SessionABC):
    """An Agents SDK session whose items are loopmem session turns of `session_id` (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        client: AsyncClient,
        *,
        project_id: str | None = None,
        session_settings: SessionSettings | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.client = client
        self.project_id = project_id
        # A batch's body stays under 7/8 of the server's cap (`max_body_bytes`, the service's
        # LOOPMEM_MAX_REQUEST_BODY_BYTES): headroom for a proxy in front that counts or adds more than the service.
        self.batch_bytes = max_body_bytes * 7 // 8

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        visible = await self._visible()
        wanted = resolve_session_limit(limit, self.session_settings)
        items = [item for _, item in visible]
        if wanted is None:
            return items
        return items[-wanted:] if wanted > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        turns = [self._turn(_role(item), _content(item), _item_mark(item)) for item in items]
        for batch in _batches(turns, self.batch_bytes):
            body = await self.client.memory_batch(batch)
            for result in body["data"]:
                # Each turn of a batch is written or refused on its own: when one is refused, the batch's other
                # turns and the earlier batches are stored (the tier is append-only, nothing is undone) and the
                # later batches are not sent.
                if "error" in result:
                    raise api_error(result["status"], {"error": result["error"]})

    async def pop_item(self) -> TResponseInputItem | None:
        visible = await self._visible()
        if not visible:
            return None
        turn_id, item = visible[-1]
        await self.client.memory_remember(
            **self._turn("system", "(retracted the previous turn)", {"retracts": turn_id})
        )
        return item

    async def clear_session(self) -> None:
        await self.client.memory_remember(**self._turn("system", "(conversation history cleared)", {"cleared": True}))

    async def _visible(self) -> list[tuple[str, TResponseInputItem]]:
        """(turn id, item) of the turns not retracted and after the newest clear marker, in order."""
        visible: list[tuple[str, TResponseInputItem]] = []
        offset = 0
        while True:
            page = await self.client.session_history(self.session_id, limit=PAGE, offset=offset)
            for turn in page["data"]:
                mark = (turn.get("metadata") or {}).get(MARK) or {}
                if mark.get("cleared"):
                    visible = []
                elif "retracts" in mark:
                    visible = [(turn_id, item) for turn_id, item in visible if turn_id != mark["retracts"]]
                elif "item" in mark:
                    visible.append((turn["id"], cast(TResponseInputItem, mark["item"])))
            if len(page["data"]) < PAGE:
                return visible
            offset += PAGE

    def _turn(self, role: str, content: str, mark: JSONObject) -> JSONObject:
        turn: JSONObject = {
            "tier": "session",
            "session_id": self.session_id,
            "role": role,
            "content": content,
            "metadata": {MARK: mark},
        }
        if self.project_id is not None:
            turn["project_id"] = self.project_id
        return turn


def _role(item: TResponseInputItem) -> str:
    role = cast(dict[str, Any], item).get("role")
    if role in ("user", "assistant", "system"):
        return str(role)
    if role == "developer":
        return "system"
    # A tool call is the assistant's act; a tool's output (and anything else) is neither the user's nor the
    # assistant's own voice, so it is not stored as theirs.
    return "assistant" if cast(dict[str, Any], item).get("type") == "function_call" else "system"


def _content(item: TResponseInputItem) -> str:
    fields = cast(dict[str, Any], item)
    content = fields.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(str(part.get("text")) for part in content if isinstance(part, dict) and part.get("text"))
    elif fields.get("type") == "function_call":
        text = f"{fields.get('name')}({fields.get('arguments')})"
    elif fields.get("type") == "function_call_output":
        output = fields.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
    else:
        text = ""
    if not text.strip():
        text = json.dumps(fields, ensure_ascii=False)
    return text[:MAX_CONTENT_CHARS]


def _item_mark(item: TResponseInputItem) -> JSONObject:
    """The metadata that keeps `item`: the item itself, or (over MAX_ITEM_BYTES) a copy with its strings cut."""
    fields = cast(dict[str, Any], item)
    if _size(fields) <= MAX_ITEM_BYTES:
        return {"item": fields}
    limit = MAX_ITEM_BYTES
    while limit >= 256:
        cut = _cut(fields, limit)
        if _size(cut) <= MAX_ITEM_BYTES:
            return {"item": cut, "truncated": True}
        limit //= 2
    kept: JSONObject = {key: fields[key] for key in ITEM_IDENTITY if isinstance(fields.get(key), str)}
    kept["output" if "output" in fields else "content"] = _content(item) + CUT_MARK
    # A character is at most 12 bytes of JSON (an escaped surrogate pair).
    return {"item": _cut(kept, MAX_ITEM_BYTES // 12), "truncated": True}


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + CUT_MARK
    if isinstance(value, dict):
        return {key: _cut(part, limit) for key, part in value.items()}
    if isinstance(value, list):
        return [_cut(part, limit) for part in value]
    return value


def _size(value: Any) -> int:
    # As the client encodes a body (json.dumps defaults), so that sizes add up to the body sent.
    return len(json.dumps(value).encode())


def _batches(turns: list[JSONObject], budget: int) -> list[list[JSONObject]]:
    """`turns` in order, as batches of at most BATCH whose body `{"memories": [...]}` is at most `budget` bytes (a
    turn over it alone goes alone, for the server to refuse)."""
    envelope = _size({"memories": []})
    batches: list[list[JSONObject]] = []
    current: list[JSONObject] = []
    used = envelope
    for turn in turns:
        size = _size(turn) + (2 if current else 0)  # ", " between two turns
        if current and (len(current) == BATCH or used + size > budget):
            batches.append(current)
            current, used, size = [], envelope, size - 2
        current.append(turn)
        used += size
    if current:
        batches.append(current)
    return batches
