"""Prepared reads (loopmem.reads.prepared): compiled once per shape, they answer exactly what the ORM read answers,
always inside the session's own scope, and a shape that cannot be proven scoped is never prepared."""

from __future__ import annotations

import random
import uuid

import pytest
from django.db.models.expressions import RawSQL

from loopmem.embedding import vector_index
from loopmem.reads import scoped
from loopmem.reads.prepared import PreparedRead, PreparedValues, UnpreparableRead
from loopmem.reads.where_guard import UnscopedHeavyRead
from loopmem.tenancy.scope import Scope
from memory import selectors
from memory.models import Memory
from projects.services import project_create
from tests.memory.conftest import heavy_db

pytestmark = heavy_db

MODEL = "test:prepared"
DIMENSIONS = 8


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(DIMENSIONS)]


def _rows(scope: Scope, count: int, rng: random.Random, **fields) -> list[Memory]:
    return [
        Memory.objects.create(
            tenant_id=scope.tenant_id,
            subject_id=scope.subject_id,
            project_id=scope.project_id,
            text=f"{scope.subject_id} fact {n}",
            tags=["t", str(n)],
            metadata={"n": n},
            embedding=_vector(rng),
            embedding_model=MODEL,
            **fields,
        )
        for n in range(count)
    ]


def _exact_builder(k: int, subject_rows: int, include_superseded: bool = False):
    def build(scope: Scope, vector: list[float], model_id: str):
        candidates = selectors._candidates(scope, model_id, len(vector), include_superseded=include_superseded)
        return selectors._exact(scope, candidates, vector, k, subject_rows)

    return build


def _fields(memory: Memory) -> dict[str, object]:
    values = {field.attname: getattr(memory, field.attname) for field in Memory._meta.concrete_fields}
    for heavy in ("embedding", "pending_embedding", "search_vector"):
        values.pop(heavy)
    return {**values, "distance": memory.distance}  # type: ignore[attr-defined]


@pytest.mark.parametrize("subject_rows", [5, selectors.EXACT_TWO_STEP_MIN_ROWS], ids=["one-step", "two-step"])
def test_a_prepared_read_answers_what_the_orm_read_answers(tenant, subject_rows):
    rng = random.Random(7)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _rows(scope, 30, rng)
    build = _exact_builder(10, subject_rows)
    prepared = PreparedRead[Memory](build, dimensions=DIMENSIONS, with_project=False)
    for _ in range(3):  # one compiled shape, many vectors
        query = _vector(rng)
        with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
            expected = session.fetch(build(scope, query, MODEL))
            got = prepared.run(session, scope=scope, vector=query, model_id=MODEL)
        assert len(got) == 10
        assert [_fields(m) for m in got] == [_fields(m) for m in expected]


def test_a_prepared_read_answers_only_the_sessions_subject_and_tenant(tenant, other_tenant):
    rng = random.Random(11)
    mine = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _rows(mine, 5, rng)
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-b"), 5, rng)
    _rows(Scope(tenant_id=other_tenant.id, subject_id="agent-a"), 5, rng)
    prepared = PreparedRead[Memory](_exact_builder(20, 5), dimensions=DIMENSIONS, with_project=False)
    for tenant_id, subject_id in [(tenant.id, "agent-a"), (tenant.id, "agent-b"), (other_tenant.id, "agent-a")]:
        with scoped.scoped_session(tenant_id=tenant_id, subject_id=subject_id) as session:
            got = prepared.run(
                session, scope=Scope(tenant_id=tenant_id, subject_id=subject_id), vector=_vector(rng), model_id=MODEL
            )
        assert len(got) == 5
        assert {(m.tenant_id, m.subject_id) for m in got} == {(tenant_id, subject_id)}


def test_the_project_is_bound_and_its_presence_is_part_of_the_shape(tenant):
    rng = random.Random(13)
    ops = project_create(tenant_id=tenant.id, name="Ops")
    dev = project_create(tenant_id=tenant.id, name="Dev")
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-a", project_id=ops.id), 4, rng)
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-a", project_id=dev.id), 4, rng)
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-a"), 4, rng)
    prepared = PreparedRead[Memory](_exact_builder(20, 12), dimensions=DIMENSIONS, with_project=True)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        for project in (ops, dev):
            got = prepared.run(
                session, scope=Scope(tenant.id, "agent-a", project.id), vector=_vector(rng), model_id=MODEL
            )
            # The partition rule: the project's rows and the subject's unpartitioned ones.
            assert {m.project_id for m in got} == {project.id, None}
            assert len(got) == 8
        with pytest.raises(ValueError, match="part of its shape"):
            prepared.run(session, scope=Scope(tenant.id, "agent-a"), vector=_vector(rng), model_id=MODEL)


def test_the_model_is_bound(tenant):
    rng = random.Random(17)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _rows(scope, 3, rng)
    prepared = PreparedRead[Memory](_exact_builder(10, 3), dimensions=DIMENSIONS, with_project=False)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        assert len(prepared.run(session, scope=scope, vector=_vector(rng), model_id=MODEL)) == 3
        assert prepared.run(session, scope=scope, vector=_vector(rng), model_id="test:other") == []


def test_a_shape_the_guard_cannot_prove_scoped_is_never_prepared(tenant):
    def subjectless(scope: Scope, vector: list[float], model_id: str):
        return Memory.objects.filter(tenant_id=scope.tenant_id, embedding_model=model_id)

    with pytest.raises(UnscopedHeavyRead):
        PreparedRead(subjectless, dimensions=DIMENSIONS, with_project=False)


def test_a_shape_that_spells_a_bound_value_into_its_sql_is_never_prepared(tenant):
    # Scoped by its WHERE, but the subject also sits in the SQL text: a reuse would carry the first subject's value.
    def inlined(scope: Scope, vector: list[float], model_id: str):
        rows = Memory.objects.for_scope(scope).filter(embedding_model=model_id)
        return rows.annotate(owner=RawSQL(f"'{scope.subject_id}'", []))

    with pytest.raises(UnpreparableRead):
        PreparedRead(inlined, dimensions=DIMENSIONS, with_project=False)


def test_recall_by_vector_prepares_unfiltered_reads_once_per_shape(tenant):
    rng = random.Random(19)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _rows(scope, 12, rng)
    before = len(selectors._prepared_reads._shapes)
    k = 7  # a k no other test asks for: a shape of its own
    answers = [selectors.recall_by_vector(scope=scope, vector=_vector(rng), model_id=MODEL, k=k).hits for _ in range(4)]
    assert len(selectors._prepared_reads._shapes) == before + 1
    assert all(len(hits) == k for hits in answers)
    other = Scope(tenant_id=tenant.id, subject_id=f"agent-{uuid.uuid4().hex[:6]}")
    assert selectors.recall_by_vector(scope=other, vector=_vector(rng), model_id=MODEL, k=k).hits == []


def test_a_shape_that_leaves_a_value_unbound_is_never_prepared(tenant):
    # Scoped, but the query vector is never used: a reuse would not notice a missing slot, so the shape is refused.
    def vectorless(scope: Scope, vector: list[float], model_id: str):
        return Memory.objects.for_scope(scope).filter(embedding_model=model_id)

    with pytest.raises(UnpreparableRead, match="vector"):
        PreparedRead(vectorless, dimensions=DIMENSIONS, with_project=False)


def test_a_shape_with_related_rows_is_never_prepared(tenant):
    def with_project_row(scope: Scope, vector: list[float], model_id: str):
        candidates = selectors._candidates(scope, model_id, len(vector), include_superseded=False)
        return selectors._exact(scope, candidates, vector, 5, 5).select_related("project")

    with pytest.raises(UnpreparableRead, match="select_related"):
        PreparedRead(with_project_row, dimensions=DIMENSIONS, with_project=False)


def test_recall_in_a_session_of_another_scope_is_refused(tenant):
    rng = random.Random(23)
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-b"), 3, rng)
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-b") as session,
        pytest.raises(UnscopedHeavyRead),
    ):
        selectors.recall_by_vector(
            scope=Scope(tenant_id=tenant.id, subject_id="agent-a"),
            vector=_vector(rng),
            model_id=MODEL,
            k=3,
            session=session,
        )


def _light_builder(scope: Scope, vector: list[float], model_id: str, *extras: str):
    rows = Memory.objects.for_scope(scope).filter(embedding_model=model_id)
    ranked = rows.annotate(distance=vector_index.exact_distance(vector)).order_by("distance", "id")
    return (ranked.filter(text__in=extras) if extras else ranked).values_list("id", "text", "distance")


def test_prepared_values_answer_what_the_orm_values_read_answers_and_bind_their_own_values(tenant):
    rng = random.Random(29)
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _rows(scope, 6, rng)
    _rows(Scope(tenant_id=tenant.id, subject_id="agent-b"), 6, rng)
    prepared = PreparedValues(_light_builder, dimensions=DIMENSIONS, with_project=False, extras=2)
    for texts in [("agent-a fact 1", "agent-a fact 4"), ("agent-a fact 2", "agent-b fact 3")]:
        query = _vector(rng)
        with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
            expected = session.values(_light_builder(scope, query, MODEL, *texts))
            got = prepared.run(session, scope=scope, vector=query, model_id=MODEL, extras=texts)
        assert got == [tuple(row) for row in expected]
    assert [text for _, text, _ in got] == ["agent-a fact 2"]  # another subject's text matches nothing here
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session,
        pytest.raises(ValueError, match="2 values of its own"),
    ):
        prepared.run(session, scope=scope, vector=_vector(rng), model_id=MODEL, extras=["agent-a fact 1"])


def test_a_shape_that_leaves_one_of_its_own_values_unbound_is_never_prepared(tenant):
    def drops_the_second(scope: Scope, vector: list[float], model_id: str, first: str, second: str):
        return _light_builder(scope, vector, model_id, first)

    with pytest.raises(UnpreparableRead, match="extra1"):
        PreparedValues(drops_the_second, dimensions=DIMENSIONS, with_project=False, extras=2)


def test_a_prepared_read_refuses_a_scope_that_is_not_its_sessions(tenant):
    prepared = PreparedRead[Memory](_exact_builder(10, 3), dimensions=DIMENSIONS, with_project=False)
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-b") as session,
        pytest.raises(UnscopedHeavyRead),
    ):
        prepared.run(session, scope=Scope(tenant.id, "agent-a"), vector=[0.0] * DIMENSIONS, model_id=MODEL)


def test_a_shape_that_binds_a_value_only_transformed_is_never_prepared(tenant):
    # The subject reaches the SQL as "%<subject>%": reused, the read would match the first subject's rows for ever.
    def transformed(scope: Scope, vector: list[float], model_id: str):
        rows = Memory.objects.for_scope(scope).filter(embedding_model=model_id, text__contains=scope.subject_id)
        return rows.annotate(distance=vector_index.exact_distance(vector))

    with pytest.raises(UnpreparableRead, match="transformed"):
        PreparedRead[Memory](transformed, dimensions=DIMENSIONS, with_project=False)


def test_rows_and_values_are_prepared_by_their_own_kind(tenant):
    with pytest.raises(UnpreparableRead, match="PreparedValues"):
        PreparedRead(_light_builder, dimensions=DIMENSIONS, with_project=False)
    with pytest.raises(UnpreparableRead, match="PreparedRead"):
        PreparedValues(_exact_builder(5, 5), dimensions=DIMENSIONS, with_project=False)
