"""`LoopmemStore`: LangGraph's `BaseStore` over loopmem's long-term memory (docs/agents.md, "LangGraph").

The API key decides whose memory this is; nothing in a namespace can name another subject or tenant. A namespace
only narrows inside the key's own memory: each item is one long-term memory whose metadata carries its place,

    {"langgraph": {"project": <project id or "">, "depth": 2, "namespace": {"0": "memories", "1": "u1"},
                   "key": "k", "value": {...}, "created_at": <first version's time, on a correction>}}

so a namespace prefix, a key and a `filter` on the value are all one JSON-containment filter, applied inside the
scoped search, and the store's `project_id` and `tags` narrow further. A filter on a list, or `$eq` on a list or an
object, is equality, which containment is not: those are checked again on the answers (`_value_filter`). The
namespace is kept by position ("0", "1", ...) because containment on a JSON array ignores order.

`put` on an existing key is a correction (`PATCH`: the old value stays in the memory's history); `put(..., None)`
(and `delete`) forgets every version, oldest first, because forgetting only the newest would bring the one it
corrected back (and so a forget cut short leaves the current value or nothing, never an older one).
`search` with a query is hybrid recall (by meaning and by the words); without one, the newest items first.

Each operation is written once, as a plan that yields the `Call`s it needs and receives their answers, and run
by `batch` on the sync `Client` or by `abatch` on the `AsyncClient`.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from agent.client import (
    AlreadySuperseded,
    JSONObject,
    LoopmemError,
    LoopmemUnreachable,
    MemoryFilters,
    NotFound,
    RecallMode,
)
from agent.endpoints import CALLS, Call
from agent.httpx_client import AsyncClient, Client

T = TypeVar("T")
Plan = Generator[Call, JSONObject, T]

MARK = "langgraph"
# Fields whose string is the memory's text, in this order, when `put` names no `index` fields (LangMem's tools
# store {"content": ...}); any other value is stored as its JSON.
TEXT_FIELDS = ("content", "text", "memory")
MAX_RECALL = 100  # the API's recall limit: search(query=...) reaches offset + limit <= 100
PAGE = 200  # the API's list limit
FORGET_ATTEMPTS = 3  # a DELETE whose answer was lost is sent again, at most this many times in all
MAX_PAGES = 100  # list_namespaces reads at most this many pages (20,000 rows, twice the default quota)


class LoopmemStore(BaseStore):
    """A LangGraph store whose items are the API key's long-term memories (see the module docstring)."""

    supports_ttl = False

    def __init__(
        self,
        client: Client,
        async_client: AsyncClient,
        *,
        project_id: str | None = None,
        tags: Sequence[str] = (),
        mode: RecallMode = "hybrid",
    ) -> None:
        self.client = client
        self.async_client = async_client
        self.project_id = project_id
        self.tags = list(tags)
        self.mode: RecallMode = mode

    @classmethod
    def connect(
        cls, base_url: str, api_key: str, *, project_id: str | None = None, tags: Sequence[str] = (), **options: Any
    ) -> LoopmemStore:
        """A store for `api_key` at `base_url`; `options` go to both clients (timeout, retry, ...)."""
        return cls(
            Client(base_url, api_key, **options),
            AsyncClient(base_url, api_key, **options),
            project_id=project_id,
            tags=tags,
        )

    @classmethod
    def from_env(cls, *, project_id: str | None = None, tags: Sequence[str] = (), **options: Any) -> LoopmemStore:
        """A store for LOOPMEM_AGENT_KEY at LOOPMEM_URL."""
        return cls(Client.from_env(**options), AsyncClient.from_env(**options), project_id=project_id, tags=tags)

    def close(self) -> None:
        """Close the sync client's connections (the async client's close with their event loops)."""
        self.client.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [_run(self._plan(op), self.client) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await _arun(self._plan(op), self.async_client) for op in ops]

    # --- Plans ----------------------------------------------------------------------------------------------------

    def _plan(self, op: Op) -> Plan[Result]:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            return self._forget(op) if op.value is None else self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _get(self, namespace: tuple[str, ...], key: str) -> Plan[Item | None]:
        live = yield from self._live(namespace, key, limit=1)
        return _item(live[0]) if live else None

    def _put(self, op: PutOp) -> Plan[None]:
        assert op.value is not None
        value = dict(op.value)
        text = _text(value, op.index)
        for _ in range(2):  # a concurrent correction wins once; correct its newer version instead
            live = yield from self._live(op.namespace, op.key, limit=1)
            if not live:
                metadata = self._metadata(op.namespace, op.key, value, created_at=None)
                yield CALLS.memory_remember(
                    text=text, metadata=metadata, project_id=self.project_id, tags=self.tags or None
                )
                return None
            current = live[0]
            if current["metadata"][MARK].get("value") == value and current["text"] == text:
                return None  # unchanged: no new version
            first = current["metadata"][MARK].get("created_at") or current["inserted_at"]
            metadata = self._metadata(op.namespace, op.key, value, created_at=first)
            try:
                yield CALLS.memory_correct(current["id"], text=text, metadata=metadata)
            except AlreadySuperseded:
                continue
            return None
        raise LoopmemError(f"the item {op.namespace}/{op.key} kept changing while it was being corrected")

    def _forget(self, op: PutOp) -> Plan[None]:
        # Every live row with this key (two first puts at once can make two), each with its whole history.
        live = yield from self._live(op.namespace, op.key, limit=PAGE)
        for memory in live:
            history = yield CALLS.memory_history(memory["id"])
            # Oldest first: forgetting a version that a correction replaced leaves the correction live, so a forget
            # cut short leaves the current value (or nothing). Newest first would bring each older value back.
            for version in history["data"]:
                yield from _forget_version(version["id"])
        return None

    def _search(self, op: SearchOp) -> Plan[list[SearchItem]]:
        marker = self._marker(op.namespace_prefix)
        exact = True  # whether the containment filter is already the equality asked for
        if op.filter:
            marker[MARK]["value"], exact = _value_filter(op.filter)
        conditions = op.filter or {}
        filters = MemoryFilters(metadata=marker, tags=self.tags or None)

        def equal(memory: JSONObject) -> bool:
            return exact or _value_equals(memory["metadata"][MARK].get("value") or {}, conditions)

        if op.query:
            wanted = min(op.offset + op.limit, MAX_RECALL)
            if op.offset >= wanted:
                return []
            # Containment lets through lists and objects that only contain the ones asked for: the best
            # MAX_RECALL candidates are checked exactly, so that the ones that are equal are all there to slice.
            body = yield CALLS.memory_recall(
                query=op.query,
                limit=wanted if exact else MAX_RECALL,
                project_id=self.project_id,
                filters=filters,
                mode=self.mode,
            )
            hits = [hit for hit in body["data"] if equal(hit["memory"])][op.offset : op.offset + op.limit]
            return [_item(hit["memory"], score=hit.get("score")) for hit in hits]
        if exact:
            page = yield CALLS.memory_list(limit=min(op.limit, PAGE), offset=op.offset, filters=filters)
            return [_item(memory) for memory in page["data"]]
        # Checked exactly after the search: read pages until `offset + limit` are equal (or none are left), so
        # that a page of near misses never hides the matches after it.
        found: list[JSONObject] = []
        for number in range(MAX_PAGES):
            page = yield CALLS.memory_list(limit=PAGE, offset=number * PAGE, filters=filters)
            found.extend(memory for memory in page["data"] if equal(memory))
            if len(found) >= op.offset + op.limit or len(page["data"]) < PAGE:
                break
        return [_item(memory) for memory in found[op.offset : op.offset + op.limit]]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        prefix = next((c.path for c in op.match_conditions or () if c.match_type == "prefix"), ())
        filters = MemoryFilters(metadata=self._marker(prefix, wildcards=True), tags=self.tags or None)
        found: set[tuple[str, ...]] = set()
        for number in range(MAX_PAGES):
            page = yield CALLS.memory_list(limit=PAGE, offset=number * PAGE, filters=filters)
            found.update(_namespace(memory) for memory in page["data"])
            if len(page["data"]) < PAGE:
                break
        matching = {
            ns[: op.max_depth] if op.max_depth is not None else ns
            for ns in found
            if all(_matches(ns, condition) for condition in op.match_conditions or ())
        }
        return sorted(matching)[op.offset : op.offset + op.limit]

    def _live(self, namespace: tuple[str, ...], key: str, *, limit: int) -> Plan[list[JSONObject]]:
        marker = self._marker(namespace)
        marker[MARK].update(depth=len(namespace), key=key)
        body = yield CALLS.memory_list(limit=limit, filters=MemoryFilters(metadata=marker, tags=self.tags or None))
        data: list[JSONObject] = body["data"]
        return data

    def _marker(self, prefix: Sequence[str], *, wildcards: bool = False) -> JSONObject:
        """The metadata filter for this store's items under `prefix` (a `*` label matches any, when allowed)."""
        positions = {str(i): label for i, label in enumerate(prefix) if not (wildcards and label == "*")}
        return {MARK: {"project": self.project_id or "", "namespace": positions}}

    def _metadata(
        self, namespace: tuple[str, ...], key: str, value: JSONObject, *, created_at: str | None
    ) -> JSONObject:
        mark: JSONObject = {
            "project": self.project_id or "",
            "depth": len(namespace),
            "namespace": {str(i): label for i, label in enumerate(namespace)},
            "key": key,
            "value": value,
        }
        if created_at is not None:
            mark["created_at"] = created_at
        return {MARK: mark}


def _forget_version(memory_id: str) -> Plan[None]:
    # The client does not resend a DELETE whose answer was lost (in general a repeat would answer 404 for a forget
    # that happened); here a 404 means done, so the forget is sent again.
    for attempt in range(FORGET_ATTEMPTS):
        try:
            yield CALLS.memory_forget(memory_id)
        except NotFound:  # forgotten meanwhile, or by the attempt whose answer was lost
            return None
        except LoopmemUnreachable:
            if attempt + 1 == FORGET_ATTEMPTS:
                raise
            continue
        return None
    return None


# --- Running a plan -------------------------------------------------------------------------------------------------


def _run(plan: Plan[T], client: Client) -> T:
    try:
        call = next(plan)
        while True:
            try:
                answer = client.send(call)
            except LoopmemError as exc:
                call = plan.throw(exc)
                continue
            call = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


async def _arun(plan: Plan[T], client: AsyncClient) -> T:
    try:
        call = next(plan)
        while True:
            try:
                answer = await client.send(call)
            except LoopmemError as exc:
                call = plan.throw(exc)
                continue
            call = plan.send(answer)
    except StopIteration as done:
        result: T = done.value
        return result


# --- Mapping --------------------------------------------------------------------------------------------------------


def _item(memory: JSONObject, *, score: float | None = None) -> SearchItem:
    mark = memory["metadata"][MARK]
    return SearchItem(
        namespace=_namespace(memory),
        key=mark["key"],
        value=mark.get("value") or {},
        created_at=_time(mark.get("created_at") or memory["inserted_at"]),
        updated_at=_time(memory["inserted_at"]),
        score=score,
    )


def _namespace(memory: JSONObject) -> tuple[str, ...]:
    mark = memory["metadata"][MARK]
    return tuple(mark["namespace"][str(i)] for i in range(mark["depth"]))


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _text(value: Mapping[str, Any], index: Any) -> str:
    """The memory's text: the `index` fields' values (dotted paths allowed), else the first of TEXT_FIELDS that is
    a non-blank string, else the value as JSON. loopmem embeds every memory, so `index=False` changes nothing."""
    if isinstance(index, list) and index:
        parts = [_render(_path(value, field)) for field in index]
        text = "\n".join(part for part in parts if part.strip())
        if text.strip():
            return text
    for field in TEXT_FIELDS:
        candidate = value.get(field)
        if isinstance(candidate, str) and candidate.strip():
            return candidate
        if field == "content" and candidate is not None:
            return _render(candidate)
    return _render(value)


def _path(value: Mapping[str, Any], path: str) -> object:
    current: object = value
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    return current


def _render(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value_filter(conditions: Mapping[str, Any]) -> tuple[JSONObject, bool]:
    """A SearchOp `filter` as (JSON containment on the value, whether that containment is the filter itself).

    The filter is equality, compared as LangGraph's InMemoryStore compares: a scalar is equal, a list is equal in
    order and length, `{"$eq": v}` is `== v`, and an object without `$` keys matches field by field. Containment
    is the same for scalars and those objects; a list, or `$eq` on a list or an object, contains more than the
    equal ones, so it is checked again on the answers (`_value_equals`). Any other operator raises: it could only
    be applied after the search, on no more than the answers."""
    wanted, exact = _containment(dict(conditions))
    assert isinstance(wanted, dict)
    return wanted, exact


def _containment(condition: Any) -> tuple[Any, bool]:
    if isinstance(condition, Mapping):
        if any(str(name).startswith("$") for name in condition):
            if set(condition) != {"$eq"}:
                raise ValueError(f"LoopmemStore filters support equality only ($eq), got {dict(condition)!r}")
            target = condition["$eq"]
            return target, not isinstance(target, Mapping | list | tuple)
        parts: JSONObject = {}
        exact = True
        for field, value in condition.items():
            parts[field], field_exact = _containment(value)
            exact = exact and field_exact
        return parts, exact
    if isinstance(condition, list | tuple):
        return [_containment(value)[0] for value in condition], False
    return condition, True


def _value_equals(have: Any, want: Any) -> bool:
    """Whether a stored value meets the filter `want` (the comparison of LangGraph's InMemoryStore)."""
    if isinstance(want, Mapping):
        if any(str(name).startswith("$") for name in want):
            return bool(have == _json(want["$eq"]))
        return isinstance(have, Mapping) and all(_value_equals(have.get(field), value) for field, value in want.items())
    if isinstance(want, list | tuple):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(_value_equals(item, wanted) for item, wanted in zip(have, want, strict=True))
        )
    return bool(have == want)


def _json(value: Any) -> Any:
    # What the value is once stored (a tuple comes back a list), so that `$eq` compares like with like.
    return json.loads(json.dumps(value))


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want in ("*", have) for want, have in zip(path, part, strict=True))
