"""The `heavy_read` path: kNN and search, on a replica when one is configured.

Every heavy read of memory rows goes through a scoped session: it proves the query is scoped (a structural
guard over the compiled WHERE tree, not a convention) and sheds load per tenant. The statement timeout is a
property of the heavy-read connection (`loopmem.db_timeouts`), so a read that needs nothing else (the exact read,
a count, the keyword lane) runs in autocommit: one round trip. A read that needs `SET LOCAL` HNSW or planner
options opens the session's transaction on first use, and the options hold until the session ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import connections, models, transaction
from django.db.models.expressions import Col
from django.db.models.lookups import Exact
from django.db.models.sql import Query
from django.db.models.sql.where import AND, WhereNode

from loopmem import after_response, metrics, redis_outage
from loopmem.errors import HeavyReadOverloaded

logger = logging.getLogger(__name__)

HEAVY_READ_ALIAS = "heavy_read"

M = TypeVar("M", bound=models.Model)


class HeavyReadRouter:
    """Ordinary ORM traffic stays on `default`; only explicit `.using(HEAVY_READ_ALIAS)` reaches the alias.

    Migrations run on `default` alone: `heavy_read` is the same database or a replica of it.
    """

    def db_for_read(self, model: type, **hints: Any) -> str:
        return "default"

    def db_for_write(self, model: type, **hints: Any) -> str:
        return "default"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == "default"


class UnscopedHeavyRead(AssertionError):
    """A heavy read without the conjunctive tenant/subject predicates: a programming error, never served."""


# --- The structural guard --------------------------------------------------------------------------------


def assert_scoped(query: Query, *, tenant_id: uuid.UUID, subject_id: str) -> None:
    """Raise UnscopedHeavyRead unless the outer query pins `subject_id` and every table pins `tenant_id`.

    A predicate counts only when it is an equality in an AND chain (never under OR or NOT), on the table's
    own column, equal to the scope's value. Subqueries are checked for the tenant recursively.
    """
    base_alias = query.get_initial_alias()
    if not _pins(query.where, base_alias, "subject_id", subject_id):
        raise UnscopedHeavyRead("heavy read refused: the outer query has no conjunctive subject_id for the scope")
    _assert_tenant_everywhere(query, tenant_id)


def _assert_tenant_everywhere(query: Query, tenant_id: uuid.UUID) -> None:
    if query.combinator or query.extra:
        # UNION/INTERSECT/EXCEPT parts and raw extra() SQL are outside what the guard can prove: refuse them.
        raise UnscopedHeavyRead("heavy read refused: combined queries and extra() SQL cannot be proven scoped")
    base_alias = query.get_initial_alias()
    for alias, table in query.alias_map.items():
        if alias != base_alias and not query.alias_refcount.get(alias):
            continue  # an alias the compiled SQL does not use
        if not _pins(query.where, alias, "tenant_id", tenant_id):
            raise UnscopedHeavyRead(f"heavy read refused: table {table.table_name} has no conjunctive tenant_id")
    for subquery in _subqueries(query):
        _assert_tenant_everywhere(subquery, tenant_id)


def _conjuncts(node: WhereNode) -> Iterator[Any]:
    if node.negated or (node.connector != AND and len(node.children) > 1):
        return
    for child in node.children:
        if isinstance(child, WhereNode):
            yield from _conjuncts(child)
        else:
            yield child


def _pins(where: WhereNode, alias: str, column: str, value: object) -> bool:
    for lookup in _conjuncts(where):
        if (
            isinstance(lookup, Exact)
            and isinstance(lookup.lhs, Col)
            and lookup.lhs.alias == alias
            and lookup.lhs.target.column == column
            and str(lookup.rhs) == str(value)
        ):
            return True
    return False


def _subqueries(query: Query) -> Iterator[Query]:
    order_by = [expression for expression in query.order_by if not isinstance(expression, str)]
    stack: list[Any] = [query.where, *query.annotations.values(), *order_by]
    while stack:
        node = stack.pop()
        if isinstance(node, Query):
            yield node
            continue
        inner = getattr(node, "query", None)  # Subquery / Exists wrap a Query
        if isinstance(inner, Query):
            yield inner
            continue
        if isinstance(node, WhereNode):
            stack.extend(node.children)
            continue
        rhs = getattr(node, "rhs", None)  # `id__in=<queryset>` puts a Query on the lookup's rhs
        if rhs is not None:
            stack.append(rhs)
        if hasattr(node, "get_source_expressions"):
            stack.extend(e for e in node.get_source_expressions() if e is not None)


# --- Running a guarded read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """HNSW settings a read asks for."""

    ef_search: int | None = None
    iterative_scan: bool = False
    max_scan_tuples: int | None = None
    # Prefer an index that yields the ORDER BY over scanning and sorting (enable_sort off). An ANN read means the
    # HNSW index must answer: the planner prices sorting a few thousand rows by distance below an HNSW scan at
    # ef_search 100 (it does not count fetching each row's TOASTed vector), then runs an exact scan 10-100x slower
    # than the index, while `meta` would report the ANN read.
    index_order: bool = False


@dataclass(frozen=True)
class AppliedOptions:
    """What the read actually ran with (read back from the session, not assumed)."""

    iterative_scan: str  # "off" | "applied" | "unavailable"
    iterative_scan_reason: str | None = None


ITERATIVE_SCAN_UNAVAILABLE_REASON = (
    "The approximate index ran without iterative scanning (pgvector < 0.8 or the setting was refused); "
    "rows may be missing from these results."
)


def apply_read_options(options: ReadOptions) -> AppliedOptions:
    """SET LOCAL the HNSW options for the rest of this transaction, in one statement; report what is in force.

    `set_config` returns the value in force after it ran, so the same round trip reads the options back.
    """
    assignments: list[tuple[str, str]] = []
    if options.ef_search is not None:
        assignments.append(("hnsw.ef_search", str(options.ef_search)))
    supported = not options.iterative_scan or pgvector_supports_iterative_scan()
    if not options.iterative_scan:
        assignments.append(("hnsw.iterative_scan", "off"))
    elif supported:
        assignments.append(("hnsw.iterative_scan", "relaxed_order"))
        if options.max_scan_tuples is not None:
            assignments.append(("hnsw.max_scan_tuples", str(options.max_scan_tuples)))
    if options.index_order:
        assignments.append(("enable_sort", "off"))
    if not assignments:
        return AppliedOptions(iterative_scan="unavailable", iterative_scan_reason=ITERATIVE_SCAN_UNAVAILABLE_REASON)
    calls = ", ".join("set_config(%s, %s, true)" for _ in assignments)
    with connections[HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute(f"SELECT {calls}", [value for pair in assignments for value in pair])
        row = cursor.fetchone()
    if not options.iterative_scan:
        return AppliedOptions(iterative_scan="off")
    in_force = dict(zip((name for name, _ in assignments), row or (), strict=False))
    if in_force.get("hnsw.iterative_scan") == "relaxed_order":
        return AppliedOptions(iterative_scan="applied")
    return AppliedOptions(iterative_scan="unavailable", iterative_scan_reason=ITERATIVE_SCAN_UNAVAILABLE_REASON)


class _HeavySession:
    """What both sessions share: the transaction, opened only when a read needs `SET LOCAL` options.

    Under READ COMMITTED (PostgreSQL's default; loopmem asks for no other) every statement takes its own snapshot,
    in a transaction or not, so a read that needs no option sees the same rows in autocommit, without the BEGIN
    and COMMIT round trips. The statement timeout needs no transaction: it is the connection's own.
    """

    def __init__(self, *, transaction_scope: contextlib.ExitStack) -> None:
        self._transaction_scope = transaction_scope
        self._in_transaction = False

    def _enter_transaction(self) -> None:
        # Entered on the session's stack: it stays open (SET LOCAL in force) until the session's `with` ends,
        # which commits it, or rolls it back on an exception, before the tenant's gate slot is given back.
        if not self._in_transaction:
            self._transaction_scope.enter_context(transaction.atomic(using=HEAVY_READ_ALIAS))
            self._in_transaction = True

    def configure(self, options: ReadOptions) -> AppliedOptions:
        """SET LOCAL the HNSW options until the session ends (its transaction opens here); report what is in force."""
        self._enter_transaction()
        return apply_read_options(options)


class ScopedSession(_HeavySession):
    """Reads on the heavy-read alias in which every query must prove it is scoped to the (tenant, subject)."""

    def __init__(self, *, tenant_id: uuid.UUID, subject_id: str, transaction_scope: contextlib.ExitStack) -> None:
        super().__init__(transaction_scope=transaction_scope)
        self._tenant_id = tenant_id
        self._subject_id = subject_id

    @property
    def tenant_id(self) -> uuid.UUID:
        return self._tenant_id

    @property
    def subject_id(self) -> str:
        return self._subject_id

    def fetch(self, queryset: models.QuerySet[M]) -> list[M]:
        assert_scoped(queryset.query, tenant_id=self._tenant_id, subject_id=self._subject_id)
        return list(queryset.using(HEAVY_READ_ALIAS))

    def values(self, queryset: models.QuerySet[Any, Any]) -> list[Any]:
        """The rows of a values() / values_list() queryset: only the columns a read needs, no model instances."""
        assert_scoped(queryset.query, tenant_id=self._tenant_id, subject_id=self._subject_id)
        return list(queryset.using(HEAVY_READ_ALIAS))

    def count_all(self, model: type[models.Model]) -> int:
        """How many rows of `model` the scope holds, every row (the subject's size): static SQL, no ORM.

        The ORM compiled the same two-column count on every call, and compiling cost more than running it (~0.8 against
        ~0.3 ms on a 100-row subject, 200k-row table); every recall of a subject new to the process paid it. Its WHERE
        is the scope itself, bound from this session's own tenant and subject: scoped by construction.
        """
        with connections[HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute(_count_all_sql(model), [self._tenant_id, self._subject_id])
            (count,) = cursor.fetchone()
        return int(count)

    def aggregate(self, queryset: models.QuerySet[M], **aggregates: Any) -> dict[str, Any]:
        """Aggregates over the scoped rows (the keyword lane's term statistics)."""
        assert_scoped(queryset.query, tenant_id=self._tenant_id, subject_id=self._subject_id)
        return queryset.using(HEAVY_READ_ALIAS).aggregate(**aggregates)


@functools.cache
def _count_all_sql(model: type[models.Model]) -> str:
    quote = connections[HEAVY_READ_ALIAS].ops.quote_name
    columns = {field.name: field.column for field in model._meta.concrete_fields}
    table = quote(model._meta.db_table)
    tenant, subject = (f"{table}.{quote(str(columns[name]))}" for name in ("tenant", "subject_id"))
    return f"SELECT count(*) FROM {table} WHERE {tenant} = %s AND {subject} = %s"


@contextlib.contextmanager
def _heavy_session_scope(tenant_id: uuid.UUID) -> Iterator[contextlib.ExitStack]:
    """Shed per tenant, for the whole session; the stack holds the session's transaction if a read opens one."""
    with tenant_gate(tenant_id), contextlib.ExitStack() as transaction_scope:
        yield transaction_scope


@contextlib.contextmanager
def scoped_session(*, tenant_id: uuid.UUID, subject_id: str) -> Iterator[ScopedSession]:
    """The one way memory rows are read for kNN."""
    with _heavy_session_scope(tenant_id) as transaction_scope:
        yield ScopedSession(tenant_id=tenant_id, subject_id=subject_id, transaction_scope=transaction_scope)


@functools.cache
def pgvector_supports_iterative_scan() -> bool:
    """pgvector ≥ 0.8 has `hnsw.iterative_scan` (asked once per process)."""
    with connections[HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if not row:
        return False
    major, minor = (int(part) for part in row[0].split(".")[:2])
    return (major, minor) >= (0, 8)


# --- Per-tenant in-flight cap ----------------------------------------------------------------------------


# Admission in one round trip, atomically: expire slots a killed process left, refuse at the cap (without ever
# counting the refused read, so it cannot shed another), else take a slot.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    return 0
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], math.floor(tonumber(ARGV[2])) + 1)
return 1
"""

_request_slots = threading.local()


def _held_slots() -> set[uuid.UUID]:
    held: set[uuid.UUID] | None = getattr(_request_slots, "tenants", None)
    if held is None:
        held = _request_slots.tenants = set()
    return held


@contextlib.contextmanager
def tenant_gate(tenant_id: uuid.UUID, *, count_shed: bool = True) -> Iterator[None]:
    """Admit at most HEAVY_READ_MAX_IN_FLIGHT concurrent heavy reads per tenant (a Redis semaphore).

    Entries expire after the statement timeout, so a killed process cannot hold a slot forever. Redis
    trouble fails open: shedding is protection, not a dependency. A slot already held by this thread for the tenant
    (`request_slot`, or an earlier read of the same request) admits the read: no Redis call. Otherwise one round trip
    to enter. Inside a web request the slot then belongs to the request until its response is sent: later reads of
    the request are admitted by it, and giving it back (the second round trip) waits until the client has its
    answer (loopmem.after_response). Outside a request it is given back when the block ends.
    """
    held = _held_slots()
    if tenant_id in held:
        yield
        return
    key = f"{cache.key_prefix}:heavy_read:{tenant_id}"
    token = secrets.token_hex(8)
    limit = settings.HEAVY_READ_MAX_IN_FLIGHT
    ttl = settings.HEAVY_READ_STATEMENT_TIMEOUT_MS / 1000 + 5
    # None: Redis is unreachable (or known to be), the read goes on ungated and there is no slot to give back.
    admitted = redis_outage.call(
        "heavy-read gate",
        lambda: bool(_acquire_script(redis_client())(keys=[key], args=[time.time(), ttl, token, limit])),
        fallback=None,
    )
    if admitted is False:
        if count_shed:
            metrics.HEAVY_READ_REJECTIONS.inc()
        raise HeavyReadOverloaded(details={"in_flight_limit": limit})
    metrics.HEAVY_READ_ADMITTED.inc()

    def give_back() -> None:
        held.discard(tenant_id)
        redis_outage.call("heavy-read gate", lambda: redis_client().zrem(key, token), fallback=None)

    if admitted and after_response.in_request():
        held.add(tenant_id)
        after_response.run_or_defer(give_back)
        yield
        return
    try:
        yield
    finally:
        if admitted:
            give_back()


@contextlib.contextmanager
def request_slot(tenant_id: uuid.UUID) -> Iterator[None]:
    """One gate slot for every heavy read of the block (merged recall reads its two halves under it).

    Half the gate's round trips of a block that reads twice, and it counts once against the cap. Inside a web
    request the gate already keeps a read's slot for the whole request; this makes the block's first read take it
    up front, and does the same for a block outside a request (a task). If the gate refuses, the block runs without
    a slot and each read asks the gate itself, degrading on its own as it would without this.
    """
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(tenant_gate(tenant_id, count_shed=False))
        except HeavyReadOverloaded:
            yield
            return
        held = _held_slots()
        mine = tenant_id not in held  # else the request holds the slot past this block
        held.add(tenant_id)
        try:
            yield
        finally:
            if mine:
                held.discard(tenant_id)


@functools.cache
def _acquire_script(client: redis.Redis) -> Any:
    # EVALSHA, loading the script on the first NOSCRIPT (a restarted Redis forgets scripts).
    return client.register_script(_ACQUIRE)


def redis_client() -> redis.Redis:
    """A shared client for the Redis in settings, with the short timeouts that keep outages from hanging."""
    timeout = settings.REDIS_TIMEOUT_SECONDS
    return _redis_client_for(settings.REDIS_URL, timeout)


@functools.cache
def _redis_client_for(url: str, timeout: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


# --- Tenant-scoped reads (rows with no subject: knowledge articles) ---------------------------------------


def assert_tenant_scoped(query: Query, *, tenant_id: uuid.UUID) -> None:
    """Raise UnscopedHeavyRead unless every table of the query (subqueries included) pins `tenant_id`.

    For rows that belong to a tenant but to no subject. Which rows of the tenant a caller may see is the
    visibility predicate's job (`Article.objects.visible_to`); this guard makes a cross-tenant row impossible.
    """
    _assert_tenant_everywhere(query, tenant_id)


class TenantScopedSession(_HeavySession):
    """Reads on the heavy-read alias in which every query must pin the tenant on every table."""

    def __init__(self, *, tenant_id: uuid.UUID, transaction_scope: contextlib.ExitStack) -> None:
        super().__init__(transaction_scope=transaction_scope)
        self._tenant_id = tenant_id

    def fetch(self, queryset: models.QuerySet[M]) -> list[M]:
        assert_tenant_scoped(queryset.query, tenant_id=self._tenant_id)
        return list(queryset.using(HEAVY_READ_ALIAS))

    def count(self, queryset: models.QuerySet[Any, Any]) -> int:
        """The row count of any queryset over tenant rows (`.values()` and sliced ones too)."""
        assert_tenant_scoped(queryset.query, tenant_id=self._tenant_id)
        return queryset.using(HEAVY_READ_ALIAS).count()


@contextlib.contextmanager
def tenant_scoped_session(*, tenant_id: uuid.UUID) -> Iterator[TenantScopedSession]:
    """The one way tenant-owned, subject-less rows are read for search and kNN."""
    with _heavy_session_scope(tenant_id) as transaction_scope:
        yield TenantScopedSession(tenant_id=tenant_id, transaction_scope=transaction_scope)
