"""Scoped heavy reads compiled once per shape: the ORM builds the statement and the guard proves it, once.

Building and compiling a recall's queryset cost more than running it (py-spy of served recall on the 200k corpus:
~1 ms of Python per exact read against ~1 ms in PostgreSQL). What the SQL looks like depends on a few things only
(the vector's size, k, whether superseded rows or a project partition take part): its *shape*. Everything else (the
tenant, the subject, the project, the query vector, the model, and a read's own values such as a query's terms or
a page's ids) only fills parameters.

So the first read of a shape builds its queryset from sentinel values, runs the structural guard every scoped heavy
read passes (`where_guard.assert_scoped`: the WHERE pins the sentinel tenant and subject), compiles it, and records
which parameter carries which value. Later reads of the shape put the session's own tenant and subject (never a
caller's), and the request's vector, model, project and values, into those parameters and run the SQL. The rows
become model instances the way the ORM makes them (the compiler's converters, then `Model.from_db`), or, for a
values() read, tuples of the columns it selects.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import connections, models
from django.db.models.sql.compiler import SQLCompiler
from pgvector import Vector

from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.reads.scoped import ScopedSession
from loopmem.reads.where_guard import assert_scoped
from loopmem.tenancy.scope import Scope

M = TypeVar("M", bound=models.Model)

# What fills a parameter at run time: the sentinel it replaced names it.
_TENANT, _SUBJECT, _PROJECT, _VECTOR, _MODEL = "tenant", "subject", "project", "vector", "model"

# Called as build(scope, vector, model_id, *extras): `extras` are the shape's own values (each must reach the SQL as
# one parameter, unchanged).
Builder = Callable[..., "models.QuerySet[Any]"]
R = TypeVar("R")
S = TypeVar("S", bound="PreparedStatement[Any]")


class UnpreparableRead(AssertionError):
    """The ORM put a bound value into the SQL text instead of a parameter: the shape cannot be reused."""


@dataclass(frozen=True)
class _Sentinels:
    scope: Scope
    vector: list[float]
    model_id: str
    extras: tuple[str, ...]

    @classmethod
    def make(cls, *, dimensions: int, with_project: bool, extras: int = 0) -> _Sentinels:
        token = secrets.token_hex(8)
        # A vector whose text form no constant of a query can equal: one coordinate drawn at random.
        vector = [0.0] * dimensions
        vector[0] = int(token, 16) / 2**64
        return cls(
            scope=Scope(
                tenant_id=uuid.uuid4(),
                subject_id=f"prepared-subject-{token}",
                project_id=uuid.uuid4() if with_project else None,
            ),
            vector=vector,
            model_id=f"prepared-model-{token}",
            extras=tuple(f"prepared-extra-{token}-{n}" for n in range(extras)),
        )

    def slot_of(self, value: Any) -> str | None:
        """Which bound value a compiled parameter carries, or None for a constant of the shape."""
        if isinstance(value, uuid.UUID):
            if value == self.scope.tenant_id:
                return _TENANT
            if value == self.scope.project_id:
                return _PROJECT
        elif isinstance(value, str):
            if value == self.scope.subject_id:
                return _SUBJECT
            if value == self.model_id:
                return _MODEL
            if value == vector_text(self.vector):
                return _VECTOR
            if value in self.extras:
                return _extra(self.extras.index(value))
        return None

    def spelled(self) -> list[str]:
        """How each sentinel would look inlined in SQL text."""
        spelled = [
            self.scope.subject_id,
            self.model_id,
            self.scope.tenant_id.hex,
            str(self.scope.tenant_id),
            vector_text(self.vector),
            *self.extras,
        ]
        if self.scope.project_id is not None:
            spelled += [self.scope.project_id.hex, str(self.scope.project_id)]
        return spelled


def _extra(position: int) -> str:
    return f"extra{position}"


def vector_text(vector: Sequence[float]) -> str:
    """The query vector as the ORM's distance expressions pass it (pgvector's text form)."""
    return str(Vector(list(vector)).to_text())


class PreparedStatement(ABC, Generic[R]):
    """One shape of a scoped read: its SQL and which parameter takes which value. Rows: `PreparedRead`'s model
    instances or `PreparedValues`' tuples."""

    def __init__(
        self, build: Builder, *, dimensions: int, with_project: bool, extras: int = 0, with_vector: bool = True
    ) -> None:
        sentinels = _Sentinels.make(dimensions=dimensions, with_project=with_project, extras=extras)
        queryset = build(sentinels.scope, sentinels.vector, sentinels.model_id, *sentinels.extras)
        assert_scoped(queryset.query, tenant_id=sentinels.scope.tenant_id, subject_id=sentinels.scope.subject_id)
        compiler = queryset.query.get_compiler(HEAVY_READ_ALIAS)
        sql, params = compiler.as_sql()
        inlined = [spelled for spelled in sentinels.spelled() if spelled in sql]
        if inlined:
            raise UnpreparableRead(f"the compiled read spells bound values into its SQL: {inlined}")
        self.sql: str = sql
        self._params: list[Any] = list(params)
        self._slots: list[str | None] = [sentinels.slot_of(value) for value in params]
        # A bound value that reached a parameter transformed ("%<subject>%") would run as its sentinel for ever.
        transformed = [
            value
            for value, slot in zip(params, self._slots, strict=True)
            if slot is None and any(spelled in str(value) for spelled in sentinels.spelled())
        ]
        if transformed:
            raise UnpreparableRead(f"the compiled read binds a value only in a transformed form: {transformed}")
        # A value the build used but no parameter carries would run as its sentinel: refuse the shape instead.
        required = {_TENANT, _SUBJECT, *(_extra(n) for n in range(extras))}
        required |= {_MODEL, _VECTOR} if with_vector else set()
        required |= {_PROJECT} if with_project else set()
        unbound = required - set(self._slots)
        if unbound:
            raise UnpreparableRead(f"the compiled read binds no parameter for: {sorted(unbound)}")
        self._with_project = with_project
        self._extras = extras
        # Position -> (converters, expression): the compiler's own, applied with the running thread's connection.
        self._converters = compiler.get_converters([column for column, _, _ in compiler.select[: compiler.col_count]])
        self._shape_rows(queryset, compiler)

    @abstractmethod
    def _shape_rows(self, queryset: models.QuerySet[Any], compiler: SQLCompiler) -> None:
        """What the kind of read needs to know of the compiled columns to return its rows; refuse what it can't."""

    @abstractmethod
    def _row(self, row: list[Any]) -> R:
        """One row of the statement as this kind of read returns it."""

    def run(
        self,
        session: ScopedSession,
        *,
        scope: Scope,
        vector: list[float],
        model_id: str,
        extras: Sequence[Any] = (),
    ) -> list[R]:
        """The rows of this shape in the session's scope and `scope`'s project, for this vector, model and values."""
        return [
            self._row(row) for row in self._rows(session, scope=scope, vector=vector, model_id=model_id, extras=extras)
        ]

    def bind(
        self,
        session: ScopedSession,
        *,
        scope: Scope,
        vector: list[float],
        model_id: str,
        extras: Sequence[Any] = (),
    ) -> list[Any]:
        """The statement's parameters: the session's own tenant and subject (`scope` must be the session's: a read
        meant for another scope is refused), its project, and this read's values."""
        session.assert_serves(scope)
        project_id = scope.project_id
        if (project_id is not None) != self._with_project:
            raise ValueError("a prepared read's project partition is part of its shape")
        if len(extras) != self._extras:
            raise ValueError(f"this prepared read binds {self._extras} values of its own, not {len(extras)}")
        values = {
            _TENANT: session.tenant_id,
            _SUBJECT: session.subject_id,
            _PROJECT: project_id,
            _MODEL: model_id,
            _VECTOR: vector_text(vector),
            **{_extra(n): value for n, value in enumerate(extras)},
        }
        return [value if slot is None else values[slot] for value, slot in zip(self._params, self._slots, strict=True)]

    def _rows(
        self,
        session: ScopedSession,
        *,
        scope: Scope,
        vector: list[float],
        model_id: str,
        extras: Sequence[Any],
    ) -> list[list[Any]]:
        params = self.bind(session, scope=scope, vector=vector, model_id=model_id, extras=extras)
        connection = connections[HEAVY_READ_ALIAS]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = [list(row) for row in cursor.fetchall()]
        if self._converters:
            for row in rows:
                for position, (converters, expression) in self._converters.items():
                    for convert in converters:
                        row[position] = convert(row[position], expression, connection)
        return rows


class PreparedRead(PreparedStatement[M]):
    """A prepared read of model instances (with their annotations as attributes)."""

    def _shape_rows(self, queryset: models.QuerySet[Any], compiler: SQLCompiler) -> None:
        if queryset.query.values_select or compiler.klass_info is None:
            raise UnpreparableRead("a values() read has no instances: prepare it as PreparedValues")
        if compiler.klass_info.get("related_klass_infos"):
            raise UnpreparableRead("select_related rows would be dropped (and loaded lazily, outside the guard)")
        self._model: type[M] = queryset.model
        selected = compiler.select[: compiler.col_count]
        fields = compiler.klass_info["select_fields"]
        self._fields = slice(fields[0], fields[-1] + 1)
        self._attnames = [column.target.attname for column, _, _ in selected[self._fields]]
        self._annotations = dict(compiler.annotation_col_map)

    def _row(self, row: list[Any]) -> M:
        instance = self._model.from_db(HEAVY_READ_ALIAS, self._attnames, row[self._fields])
        for name, position in self._annotations.items():
            setattr(instance, name, row[position])
        return instance


class PreparedValues(PreparedStatement[tuple[Any, ...]]):
    """A prepared values_list() read: one tuple of the selected columns per row, no model instances."""

    def _shape_rows(self, queryset: models.QuerySet[Any], compiler: SQLCompiler) -> None:
        if not queryset.query.values_select:
            raise UnpreparableRead("a read of instances: prepare it as PreparedRead")

    def _row(self, row: list[Any]) -> tuple[Any, ...]:
        return tuple(row)


class PreparedShapes(Generic[S]):
    """The prepared shapes of one read, made on first use. A caller's k is part of a shape, so the count is bounded:
    past MAX_SHAPES the oldest shape is dropped (it is prepared again if asked for)."""

    MAX_SHAPES = 256

    def __init__(self, kind: Callable[..., S]) -> None:
        self._kind = kind
        self._shapes: dict[Hashable, S] = {}
        self._lock = threading.Lock()

    def get(
        self,
        shape: Hashable,
        build: Builder,
        *,
        dimensions: int,
        with_project: bool,
        extras: int = 0,
        with_vector: bool = True,
    ) -> S:
        found = self._shapes.get(shape)
        if found is None:
            with self._lock:
                found = self._shapes.get(shape)
                if found is None:
                    found = self._kind(
                        build, dimensions=dimensions, with_project=with_project, extras=extras, with_vector=with_vector
                    )
                    if len(self._shapes) >= self.MAX_SHAPES:
                        del self._shapes[next(iter(self._shapes))]
                    self._shapes[shape] = found
        return found
