"""Scoped sessions: the one way heavy reads (kNN, search, counts) reach memory rows and articles.

Every query a session runs must prove it is scoped (`loopmem.reads.where_guard`), and the whole session holds one of
its tenant's in-flight slots (`loopmem.reads.tenant_gate`). The statement timeout is a property of the heavy-read
connection (`loopmem.database.timeouts`), so a read that needs nothing else (the exact read, a count, the keyword
lane) runs in autocommit: one round trip. A read that needs `SET LOCAL` HNSW or planner options opens the session's
transaction on first use, and the options hold until the session ends.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from django.db import connections, models, transaction

from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.reads.hnsw_options import AppliedOptions, ReadOptions, apply_read_options
from loopmem.reads.tenant_gate import tenant_gate
from loopmem.reads.where_guard import UnscopedHeavyRead, assert_names_no_table, assert_scoped, assert_tenant_scoped
from loopmem.tenancy.scope import Scope

M = TypeVar("M", bound=models.Model)


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

    def assert_serves(self, scope: Scope) -> None:
        """Refuse a read meant for another scope: a prepared read binds this session's tenant and subject, so the
        mismatch the ORM path's guard would refuse must be refused before it."""
        if (self._tenant_id, self._subject_id) != (scope.tenant_id, scope.subject_id):
            raise UnscopedHeavyRead("heavy read refused: the session belongs to another scope")

    def values(self, queryset: models.QuerySet[Any, Any]) -> list[Any]:
        """The rows of a values() / values_list() queryset: only the columns a read needs, no model instances."""
        assert_scoped(queryset.query, tenant_id=self._tenant_id, subject_id=self._subject_id)
        return list(queryset.using(HEAVY_READ_ALIAS))

    def count_all(self, model: type[models.Model], *, live_only: bool = False) -> int:
        """How many rows of `model` the scope holds (the subject's size): static SQL, no ORM. `live_only`: only the rows
        nothing supersedes (`superseded_by` NULL), the rows a default read scans.

        The ORM compiled the same two-column count on every call, and compiling cost more than running it (~0.8 against
        ~0.3 ms on a 100-row subject, 200k-row table); every recall of a subject new to the process paid it. Its WHERE
        is the scope itself, bound from this session's own tenant and subject: scoped by construction.
        """
        with connections[HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute(_count_all_sql(model, live_only), [self._tenant_id, self._subject_id])
            (count,) = cursor.fetchone()
        return int(count)

    def values_over(
        self, candidates: models.QuerySet[Any, Any], statement: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """The rows of `statement`, SQL that reads the scoped `candidates` as the CTE `candidates`, computed once.

        For a read the ORM cannot say in one statement: several rankings and statistics of one scan. `statement`
        continues the WITH list (`, more AS (...) SELECT ...`) or is the SELECT itself; its parameters follow the
        queryset's. The queryset is guarded like every heavy read and the statement may name no table (refused
        otherwise), so every row the statement sees came through the guard.
        """
        assert_scoped(candidates.query, tenant_id=self._tenant_id, subject_id=self._subject_id)
        assert_names_no_table(statement)
        sql, inner_params = candidates.query.get_compiler(using=HEAVY_READ_ALIAS).as_sql()
        with connections[HEAVY_READ_ALIAS].cursor() as cursor:
            cursor.execute(f"WITH candidates AS MATERIALIZED ({sql}) {statement}", [*inner_params, *params])
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


@functools.cache
def _count_all_sql(model: type[models.Model], live_only: bool) -> str:
    quote = connections[HEAVY_READ_ALIAS].ops.quote_name
    columns = {field.name: field.column for field in model._meta.concrete_fields}
    table = quote(model._meta.db_table)
    tenant, subject = (f"{table}.{quote(str(columns[name]))}" for name in ("tenant", "subject_id"))
    live = f" AND {table}.{quote(str(columns['superseded_by']))} IS NULL" if live_only else ""
    return f"SELECT count(*) FROM {table} WHERE {tenant} = %s AND {subject} = %s{live}"


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
