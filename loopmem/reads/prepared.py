"""Scoped heavy reads compiled once per shape: the ORM builds the statement and the guard proves it, once.

Building and compiling a recall's queryset cost more than running it (py-spy of served recall on the 200k corpus:
~1 ms of Python per exact read against ~1 ms in PostgreSQL). What the SQL looks like depends on a few things only
(the vector's size, k, whether superseded rows or a project partition take part): its *shape*. Everything else (the
tenant, the subject, the project, the query vector, the model) only fills parameters.

So the first read of a shape builds its queryset from sentinel values, runs the structural guard every scoped heavy
read passes (`where_guard.assert_scoped`: the WHERE pins the sentinel tenant and subject), compiles it, and records
which parameter carries which value. Later reads of the shape put the session's own tenant and subject (never a
caller's), and the request's vector, model and project, into those parameters and run the SQL. The rows become model
instances the way the ORM makes them: the compiler's converters, then `Model.from_db`.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import connections, models
from pgvector import Vector

from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.reads.scoped import ScopedSession
from loopmem.reads.where_guard import assert_scoped
from loopmem.tenancy.scope import Scope

M = TypeVar("M", bound=models.Model)

# What fills a parameter at run time: the sentinel it replaced names it.
_TENANT, _SUBJECT, _PROJECT, _VECTOR, _MODEL = "tenant", "subject", "project", "vector", "model"

Builder = Callable[[Scope, list[float], str], "models.QuerySet[M]"]


class UnpreparableRead(AssertionError):
    """The ORM put a bound value into the SQL text instead of a parameter: the shape cannot be reused."""


@dataclass(frozen=True)
class _Sentinels:
    scope: Scope
    vector: list[float]
    model_id: str

    @classmethod
    def make(cls, *, dimensions: int, with_project: bool) -> _Sentinels:
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
        return None

    def spelled(self) -> list[str]:
        """How each sentinel would look inlined in SQL text."""
        spelled = [
            self.scope.subject_id,
            self.model_id,
            self.scope.tenant_id.hex,
            str(self.scope.tenant_id),
            vector_text(self.vector),
        ]
        if self.scope.project_id is not None:
            spelled += [self.scope.project_id.hex, str(self.scope.project_id)]
        return spelled


def vector_text(vector: Sequence[float]) -> str:
    """The query vector as the ORM's distance expressions pass it (pgvector's text form)."""
    return str(Vector(list(vector)).to_text())


class PreparedRead(Generic[M]):
    """One shape of a scoped read: its SQL, which parameter takes which value, and how rows become instances."""

    def __init__(self, build: Builder[M], *, dimensions: int, with_project: bool) -> None:
        sentinels = _Sentinels.make(dimensions=dimensions, with_project=with_project)
        queryset = build(sentinels.scope, sentinels.vector, sentinels.model_id)
        assert_scoped(queryset.query, tenant_id=sentinels.scope.tenant_id, subject_id=sentinels.scope.subject_id)
        compiler = queryset.query.get_compiler(HEAVY_READ_ALIAS)
        sql, params = compiler.as_sql()
        inlined = [spelled for spelled in sentinels.spelled() if spelled in sql]
        if inlined:
            raise UnpreparableRead(f"the compiled read spells bound values into its SQL: {inlined}")
        self.sql: str = sql
        self._params: list[Any] = list(params)
        self._slots: list[str | None] = [sentinels.slot_of(value) for value in params]
        # A value the build used but no parameter carries would run as its sentinel: refuse the shape instead.
        unbound = {_TENANT, _SUBJECT, _MODEL, _VECTOR, *([_PROJECT] if with_project else [])} - set(self._slots)
        if unbound:
            raise UnpreparableRead(f"the compiled read binds no parameter for: {sorted(unbound)}")
        if compiler.klass_info.get("related_klass_infos"):
            raise UnpreparableRead("select_related rows would be dropped (and loaded lazily, outside the guard)")
        self._with_project = with_project
        self._model: type[M] = queryset.model
        selected = compiler.select[: compiler.col_count]
        # Position -> (converters, expression): the compiler's own, applied with the running thread's connection.
        self._converters = compiler.get_converters([column for column, _, _ in selected])
        fields = compiler.klass_info["select_fields"]
        self._fields = slice(fields[0], fields[-1] + 1)
        self._attnames = [column.target.attname for column, _, _ in selected[self._fields]]
        self._annotations = dict(compiler.annotation_col_map)

    def bind(
        self, session: ScopedSession, *, project_id: uuid.UUID | None, vector: list[float], model_id: str
    ) -> list[Any]:
        """The statement's parameters: the session's own tenant and subject, and this read's values."""
        if (project_id is not None) != self._with_project:
            raise ValueError("a prepared read's project partition is part of its shape")
        values = {
            _TENANT: session.tenant_id,
            _SUBJECT: session.subject_id,
            _PROJECT: project_id,
            _MODEL: model_id,
            _VECTOR: vector_text(vector),
        }
        return [value if slot is None else values[slot] for value, slot in zip(self._params, self._slots, strict=True)]

    def run(
        self, session: ScopedSession, *, project_id: uuid.UUID | None, vector: list[float], model_id: str
    ) -> list[M]:
        """The rows of this shape in the session's scope, for this project, vector and model."""
        params = self.bind(session, project_id=project_id, vector=vector, model_id=model_id)
        connection = connections[HEAVY_READ_ALIAS]
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = [list(row) for row in cursor.fetchall()]
        for row in rows:
            for position, (converters, expression) in self._converters.items():
                for convert in converters:
                    row[position] = convert(row[position], expression, connection)
        return [self._instance(row) for row in rows]

    def _instance(self, row: Sequence[Any]) -> M:
        instance = self._model.from_db(HEAVY_READ_ALIAS, self._attnames, row[self._fields])
        for name, position in self._annotations.items():
            setattr(instance, name, row[position])
        return instance


class PreparedReads(Generic[M]):
    """The prepared shapes of one read, made on first use. A caller's k is part of a shape, so the count is bounded:
    past MAX_SHAPES the oldest shape is dropped (it is prepared again if asked for)."""

    MAX_SHAPES = 256

    def __init__(self) -> None:
        self._shapes: dict[Hashable, PreparedRead[M]] = {}
        self._lock = threading.Lock()

    def get(self, shape: Hashable, build: Builder[M], *, dimensions: int, with_project: bool) -> PreparedRead[M]:
        found = self._shapes.get(shape)
        if found is None:
            with self._lock:
                found = self._shapes.get(shape)
                if found is None:
                    found = PreparedRead(build, dimensions=dimensions, with_project=with_project)
                    if len(self._shapes) >= self.MAX_SHAPES:
                        del self._shapes[next(iter(self._shapes))]
                    self._shapes[shape] = found
        return found
