"""Hybrid recall's reads: each lane's best candidates, every one scored in both lanes, and session context.

All of it runs in the caller's guarded, (tenant, subject) scoped heavy-read session, from the shared candidate set,
and every figure is exact: fusion never guesses a figure a lane could give. Full memories are loaded only for the
page a recall returns. Three shapes of read, chosen by the subject's size (`memory.selectors.subject_size`):

- Up to SMALL_SET rows (a typical subject), one read brings every candidate in light form: its id, session, its
  predecessor in the session, cosine distance, which query terms it holds and (for a query that names days) its
  closeness to them. Term weights, the lanes' rankings and the session context are computed from that, in memory.
  Without a filter or a named day, that read and the page's are prepared once per shape (`loopmem.reads.prepared`).
- Up to LOOPMEM_RECALL_EXACT_MAX_ROWS (the quota, by default), one statement: a single scan gives every candidate
  its distance and held-terms mask, and from those the term weights and each lane's best `pool` rows
  (`_EXACT_POOL_SQL`).
- Above it (a deployment that lowered that bound), lane by lane: the keyword lane's best rows, the vector lane's
  through the verified HNSW read of `memory.selectors.recall_by_vector`, then each row's figure in the other lane.

The first two are complete by construction, like the exact vector read. A query that names days adds the time lane
(`memory.time_lane`): its closest rows join the pool, and every pooled row carries its closeness. The memories
written just after the pooled ones in their sessions join them, scored the same way.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, Case, F, FloatField, Func, Q, QuerySet, Value, When, Window
from django.db.models.functions import Lag
from django.db.models.sql.compiler import SQLCompiler

from loopmem.embedding import vector_index
from loopmem.embedding.embedders import QueryEmbedding
from loopmem.reads import scoped
from loopmem.reads.prepared import PreparedRead, PreparedShapes, PreparedValues
from loopmem.tenancy.scope import Scope
from memory import fusion, keyword_lane
from memory.candidates import CandidateSet, recall_candidates
from memory.event_time import DaySpan
from memory.filters import MemoryFilters
from memory.models import Memory
from memory.selectors import recall_by_vector, subject_size
from memory.time_lane import Closeness, TouchesDays

# Read whole, in light form, up to this many rows: beyond it the per-row work in Python (and the rows that
# travel) outweighs the aggregate read it saves (measured: at 100 rows the whole read costs half the scan's extra
# time over semantic recall, at 300 rows a little more than it).
SMALL_SET = 200


@dataclass
class HybridPool:
    """The fusion candidates with both lanes' figures, and what the API reports about the read."""

    semantic: dict[uuid.UUID, float] = field(default_factory=dict)  # cosine similarity, rows with a vector
    keyword: dict[uuid.UUID, float] = field(default_factory=dict)  # coverage, rows holding a query term
    session_of: dict[uuid.UUID, str | None] = field(default_factory=dict)  # every candidate
    previous: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)  # its predecessor in its session
    loaded: dict[uuid.UUID, Memory] = field(default_factory=dict)  # full rows a read already brought
    asked: tuple[DaySpan, ...] = ()  # the days the query names (memory.time_lane); none: no time lane
    time: dict[uuid.UUID, float] = field(default_factory=dict)  # closeness to them, every candidate, when asked
    asking: set[uuid.UUID] = field(default_factory=set)  # the candidates whose text is a question
    keywords: keyword_lane.KeywordQuery | None = None  # the query's term weights over the candidates
    hop: dict[uuid.UUID, float] = field(default_factory=dict)  # deep: each linked row's share of the seeds' terms
    lane_counts: dict[str, int] = field(default_factory=dict)
    recall_path: str | None = "exact"
    ann_iterative_scan: str | None = None
    ann_iterative_scan_reason: str | None = None

    def add(
        self,
        memory_id: uuid.UUID,
        session_id: str | None,
        distance: float | None,
        coverage: float | None,
        closeness: float | None = None,
        asks: bool = False,
    ) -> None:
        self.session_of.setdefault(memory_id, session_id)
        if asks:
            self.asking.add(memory_id)
        if closeness is not None:
            self.time[memory_id] = float(closeness)
        if distance is not None:  # NULL: no vector of the query's model yet
            self.semantic[memory_id] = max(0.0, 1.0 - float(distance))
        if coverage:  # 0: the row holds no term of the query
            self.keyword[memory_id] = float(coverage)

    def lanes(self) -> list[fusion.LaneScores]:
        return [
            fusion.LaneScores(
                id=memory_id,
                semantic=self.semantic.get(memory_id),
                keyword=self.keyword.get(memory_id),
                previous_id=self.previous.get(memory_id),
                time=self.time.get(memory_id, 0.0) if self.asked else None,
                asks=memory_id in self.asking,
            )
            for memory_id in self.session_of
        ]


def read_pool(
    session: scoped.ScopedSession,
    *,
    candidates: CandidateSet,
    terms: Sequence[str],
    embedding: QueryEmbedding,
    pool: int,
    asked: Sequence[DaySpan] = (),
) -> HybridPool:
    """Each lane's best `pool` candidates and the memories written just after them, scored in every lane.

    `asked`: the days the query names; the time lane then brings its best `pool` too, and every candidate carries
    its closeness to them.
    """
    scope, include_superseded = candidates.scope, candidates.include_superseded
    size = subject_size(session, scope, include_superseded=include_superseded)
    if size <= SMALL_SET:
        if candidates.unfiltered and not asked:
            rows = _prepared_light(session, scope, terms, embedding, include_superseded=include_superseded)
        else:
            rows = session.values(_light(candidates.rows, keyword_lane.HeldTerms(terms), embedding, asked))
        whole = _read_whole(rows, terms, pool, asked)
        if whole is not None:
            return whole
    if include_superseded or size <= settings.RECALL_EXACT_MAX_ROWS:
        hybrid, keywords = _read_exactly(session, candidates.rows, terms, embedding, pool)
    else:
        hybrid, keywords = _read_lane_by_lane(
            session, scope, candidates.rows, terms, embedding, pool, candidates.filters
        )
    hybrid.keywords = keywords
    if asked:
        _add_time_lane(session, candidates.rows, hybrid, keywords, embedding, tuple(asked), pool)
    _add_session_context(session, candidates.rows, hybrid, keywords, embedding)
    return hybrid


@dataclass(frozen=True)
class _Light:
    id: uuid.UUID
    session_id: str | None
    previous_id: uuid.UUID | None  # its predecessor in its session, among the candidates
    distance: float | None
    coverage: float
    closeness: float | None  # None: the query names no day
    asks: bool


def _light(
    candidates: QuerySet[Memory], held: keyword_lane.HeldTerms, embedding: QueryEmbedding, asked: Sequence[DaySpan]
) -> QuerySet[Memory, tuple[Any, ...]]:
    """Every candidate in light form, at most one more than SMALL_SET."""
    light = candidates.annotate(
        distance=distance_to(embedding),
        held=held,
        previous_id=_predecessor_in_session(),
        closeness=Closeness(asked) if asked else Value(None, output_field=FloatField()),
        asks=AsksQuestion(),
    ).values_list("id", "source_session_id", "previous_id", "distance", "held", "closeness", "asks")
    return light[: SMALL_SET + 1]


# The reads of a typical recall (no filter, no day named), compiled once per shape (`loopmem.reads.prepared`):
# building and compiling them through the ORM cost more than running them.
_light_reads: PreparedShapes[PreparedValues] = PreparedShapes(PreparedValues)
_page_reads: PreparedShapes[PreparedRead[Memory]] = PreparedShapes(PreparedRead)


def _prepared_light(
    session: scoped.ScopedSession,
    scope: Scope,
    terms: Sequence[str],
    embedding: QueryEmbedding,
    *,
    include_superseded: bool,
) -> list[tuple[Any, ...]]:
    """`_light` over the unfiltered candidates, prepared: the terms are the shape's own values."""

    def build(scope: Scope, vector: list[float], model_id: str, *queries: str) -> QuerySet[Memory, tuple[Any, ...]]:
        candidates = recall_candidates(scope, include_superseded=include_superseded)
        held = keyword_lane.HeldTerms(queries, as_queries=True)
        return _light(candidates, held, QueryEmbedding(vector=vector, model_id=model_id), ())

    with_project = scope.project_id is not None
    dimensions = len(embedding.vector)
    prepared = _light_reads.get(
        (SMALL_SET, len(terms), dimensions, include_superseded, with_project),
        build,
        dimensions=dimensions,
        with_project=with_project,
        extras=len(terms),
    )
    return prepared.run(
        session,
        scope=scope,
        vector=embedding.vector,
        model_id=embedding.model_id,
        extras=keyword_lane.term_queries(terms),
    )


def _read_whole(
    rows: Sequence[tuple[Any, ...]], terms: Sequence[str], pool: int, asked: Sequence[DaySpan]
) -> HybridPool | None:
    """The pool from every candidate in light form (`_light`); None when there are more than SMALL_SET."""
    if len(rows) > SMALL_SET:
        return None
    # Per distinct mask, not per row: a subject's rows share a handful of them.
    masks = Counter(row[4] for row in rows)
    holding = [sum(count for mask, count in masks.items() if mask >> n & 1) for n in range(len(terms))]
    keywords = keyword_lane.weigh(terms, rows=len(rows), holding=holding)
    coverage = {mask: keyword_lane.coverage(keywords, mask) for mask in masks}
    memories = [
        _Light(memory_id, session_id, previous_id if session_id else None, distance, coverage[mask], closeness, asks)
        for memory_id, session_id, previous_id, distance, mask, closeness, asks in rows
    ]
    by_meaning = sorted((m for m in memories if m.distance is not None), key=lambda m: (m.distance, m.id.int))[:pool]
    by_words = sorted((m for m in memories if m.coverage > 0), key=lambda m: (-m.coverage, m.id.int))[:pool]
    by_time = sorted((m for m in memories if m.closeness), key=lambda m: (-(m.closeness or 0.0), m.id.int))[:pool]
    hybrid = HybridPool(
        asked=tuple(asked), lane_counts={"semantic": len(by_meaning), "keyword": len(by_words)}, keywords=keywords
    )
    if asked:
        hybrid.lane_counts["time"] = len(by_time)
    for memory in [*by_meaning, *by_words, *by_time]:
        hybrid.add(memory.id, memory.session_id, memory.distance, memory.coverage, memory.closeness, memory.asks)
    # Session context: the memory written just after each pooled one, in its session, among the candidates.
    pooled = set(hybrid.session_of)
    for memory in memories:
        if memory.previous_id in pooled:
            hybrid.add(memory.id, memory.session_id, memory.distance, memory.coverage, memory.closeness, memory.asks)
            hybrid.previous[memory.id] = memory.previous_id
    return hybrid


def _predecessor_in_session() -> Window:
    """The id of the memory written just before this one in its session (by write order, ties by id), among the
    rows the query reads; meaningless for a memory without a session (callers ignore it)."""
    return Window(Lag("id"), partition_by=[F("source_session_id")], order_by=[F("inserted_at").asc(), F("id").asc()])


# Over `candidates` (id, source_session_id, distance, held), with parameters (term count, pool, pool, pool): the
# keyword lane's ranking (keyword_lane.RANKING_CTES), the vector lane's `pool` nearest (ties by id), and every row
# either lane ranks, with both ranks and the term statistics. Both rankings are top-N sorts of the one materialized
# scan.
_EXACT_POOL_SQL = f"""{keyword_lane.RANKING_CTES}
, by_meaning AS (
    SELECT *, row_number() OVER () AS rank FROM (
        SELECT * FROM candidates WHERE distance IS NOT NULL ORDER BY distance, id LIMIT %s
    ) nearest)
SELECT id, coalesce(m.source_session_id, w.source_session_id), coalesce(m.distance, w.distance),
       coalesce(m.held, w.held), m.rank, w.rank, {keyword_lane.STATISTICS_COLUMNS}
FROM by_meaning m FULL JOIN by_words w USING (id)
"""


def _read_exactly(
    session: scoped.ScopedSession,
    candidates: QuerySet[Memory],
    terms: Sequence[str],
    embedding: QueryEmbedding,
    pool: int,
) -> tuple[HybridPool, keyword_lane.KeywordQuery | None]:
    """One scan: every candidate scored in both lanes, kept when either lane ranks it in its best `pool`.

    Whether a row asks a question is read afterwards, for the kept rows only: on every row of a full subject it cost
    as much as the keyword lane's ranking, and carrying every row's text through the scan would cost memory."""
    light = (
        candidates.order_by()
        .annotate(distance=distance_to(embedding), held=keyword_lane.HeldTerms(terms))
        .values_list("id", "source_session_id", "distance", "held")
    )
    rows = session.values_over(light, _EXACT_POOL_SQL, [len(terms), pool, pool, pool])
    keywords = keyword_lane.weights_from(terms, rows[0][6], rows[0][7]) if rows and terms else None
    by_meaning = sorted((row for row in rows if row[4] is not None), key=lambda row: int(row[4]))
    by_words = sorted((row for row in rows if row[5] is not None), key=lambda row: int(row[5]))
    hybrid = HybridPool(lane_counts={"semantic": len(by_meaning), "keyword": len(by_words)})
    for memory_id, session_id, distance, mask, *_ in [*by_meaning, *by_words]:
        hybrid.add(memory_id, session_id, distance, keyword_lane.coverage(keywords, mask))
    if hybrid.session_of:
        asking = candidates.alias(asks=AsksQuestion()).filter(id__in=list(hybrid.session_of), asks=True)
        hybrid.asking.update(session.values(asking.values_list("id", flat=True)))
    return hybrid, keywords


def _read_lane_by_lane(
    session: scoped.ScopedSession,
    scope: Scope,
    candidates: QuerySet[Memory],
    terms: Sequence[str],
    embedding: QueryEmbedding,
    pool: int,
    filters: MemoryFilters | None,
) -> tuple[HybridPool, keyword_lane.KeywordQuery | None]:
    """A subject above the exact read's bound: each lane's best rows, then each one's figure in the other lane."""
    keywords, by_words = keyword_lane.rank_by_words(session, candidates, terms, pool)
    by_meaning = recall_by_vector(
        scope=scope, vector=embedding.vector, model_id=embedding.model_id, k=pool, session=session, filters=filters
    )
    hybrid = HybridPool(
        lane_counts={"semantic": len(by_meaning.hits), "keyword": len(by_words)},
        recall_path=by_meaning.recall_path,
        ann_iterative_scan=by_meaning.ann_iterative_scan,
        ann_iterative_scan_reason=by_meaning.ann_iterative_scan_reason,
        keywords=keywords,
    )
    for hit in by_meaning.hits:
        hybrid.loaded[hit.memory.id] = hit.memory
    ids = list({hit.memory.id for hit in by_meaning.hits} | {memory_id for memory_id, _ in by_words})
    add_scored(session, candidates, hybrid, ids, embedding)
    return hybrid, keywords


def add_scored(
    session: scoped.ScopedSession,
    candidates: QuerySet[Memory],
    hybrid: HybridPool,
    ids: list[uuid.UUID],
    embedding: QueryEmbedding,
) -> None:
    """Add `ids` to the pool with every lane's figure for the query (distance, keyword coverage by
    `hybrid.keywords`, closeness when `hybrid.asked`) and the question flag. One read."""
    if not ids:
        return
    terms = list(hybrid.keywords.weights) if hybrid.keywords is not None else []
    figures = (
        candidates.filter(id__in=ids)
        .annotate(
            distance=distance_to(embedding),
            held=keyword_lane.HeldTerms(terms),
            closeness=Closeness(hybrid.asked) if hybrid.asked else Value(None, output_field=FloatField()),
            asks=AsksQuestion(),
        )
        .values_list("id", "source_session_id", "distance", "held", "closeness", "asks")
    )
    for memory_id, session_id, distance, mask, closeness, asks in session.values(figures):
        hybrid.add(memory_id, session_id, distance, keyword_lane.coverage(hybrid.keywords, mask), closeness, asks)


def _add_time_lane(
    session: scoped.ScopedSession,
    candidates: QuerySet[Memory],
    hybrid: HybridPool,
    keywords: keyword_lane.KeywordQuery | None,
    embedding: QueryEmbedding,
    asked: tuple[DaySpan, ...],
    pool: int,
) -> None:
    """The time lane's best `pool` rows (closest event days first, ties by id), scored in every lane, and the
    closeness of the rows the other lanes pooled. Two reads, only for a query that names days."""
    hybrid.asked = asked
    terms = list(keywords.weights) if keywords is not None else []
    closest = (
        candidates.filter(TouchesDays(asked))
        .annotate(
            closeness=Closeness(asked),
            distance=distance_to(embedding),
            held=keyword_lane.HeldTerms(terms),
            asks=AsksQuestion(),
        )
        .order_by("-closeness", "id")
        .values_list("id", "source_session_id", "distance", "held", "closeness", "asks")[:pool]
    )
    pooled = list(hybrid.session_of)
    rows = session.values(closest)
    hybrid.lane_counts["time"] = len(rows)
    for memory_id, session_id, distance, mask, closeness, asks in rows:
        hybrid.add(memory_id, session_id, distance, keyword_lane.coverage(keywords, mask), closeness, asks)
    others = [memory_id for memory_id in pooled if memory_id not in hybrid.time]
    if others:
        figures = candidates.filter(id__in=others).annotate(closeness=Closeness(asked)).values_list("id", "closeness")
        hybrid.time.update((memory_id, float(closeness)) for memory_id, closeness in session.values(figures))


def _add_session_context(
    session: scoped.ScopedSession,
    candidates: QuerySet[Memory],
    hybrid: HybridPool,
    keywords: keyword_lane.KeywordQuery | None,
    embedding: QueryEmbedding,
) -> None:
    """Link each pooled row to the memory written just after it in its session, adding that memory if new.

    One read: the candidates whose predecessor in their session (by write order) is a pooled row, with both lanes'
    figures. The predecessor is taken among the candidates, so a superseded or out-of-partition memory never passes
    context on, and a memory written without a session has none.
    """
    sessions = sorted({session_id for session_id in hybrid.session_of.values() if session_id})
    if not sessions:
        return
    following = (
        candidates.filter(source_session_id__in=sessions)
        .annotate(
            previous_id=_predecessor_in_session(),
            distance=distance_to(embedding),
            held=keyword_lane.HeldTerms(list(keywords.weights) if keywords is not None else []),
            closeness=Closeness(hybrid.asked) if hybrid.asked else Value(None, output_field=FloatField()),
            asks=AsksQuestion(),
        )
        .filter(previous_id__in=list(hybrid.session_of))
        .values_list("id", "source_session_id", "distance", "held", "previous_id", "closeness", "asks")
    )
    for memory_id, session_id, distance, mask, previous_id, closeness, asks in session.values(following):
        hybrid.add(memory_id, session_id, distance, keyword_lane.coverage(keywords, mask), closeness, asks)
        hybrid.previous[memory_id] = previous_id


def load_rows(
    session: scoped.ScopedSession, candidates: CandidateSet, hybrid: HybridPool, ids: list[uuid.UUID]
) -> dict[uuid.UUID, Memory]:
    """The full memories of `ids` (the page a recall returns) among the candidates, each read once. A row forgotten
    since the lanes read it (each read is its own statement) is absent from the answer: it no longer exists."""
    missing = [memory_id for memory_id in ids if memory_id not in hybrid.loaded]
    if missing:
        if candidates.unfiltered:
            rows = _prepared_page(session, candidates.scope, missing, include_superseded=candidates.include_superseded)
        else:
            rows = session.fetch(candidates.rows.filter(id__in=missing))
        hybrid.loaded.update((row.id, row) for row in rows)
    return {memory_id: hybrid.loaded[memory_id] for memory_id in ids if memory_id in hybrid.loaded}


def _prepared_page(
    session: scoped.ScopedSession, scope: Scope, ids: list[uuid.UUID], *, include_superseded: bool
) -> list[Memory]:
    """The unfiltered candidates among `ids`, prepared: one shape whatever the page's length."""

    def build(scope: Scope, vector: list[float], model_id: str, ids: str) -> QuerySet[Memory]:
        return recall_candidates(scope, include_superseded=include_superseded).filter(AmongIds(ids))

    with_project = scope.project_id is not None
    prepared = _page_reads.get(
        ("page", include_superseded, with_project),
        build,
        dimensions=1,
        with_project=with_project,
        extras=1,
        with_vector=False,
    )
    return prepared.run(session, scope=scope, vector=[0.0], model_id="", extras=[ids])


class AmongIds(Func):
    """The row's id is one of an array passed as one parameter (`= ANY`): a page of any length is one shape.
    `ids`: that parameter (a list of ids, or the sentinel a prepared read binds in its place)."""

    output_field = BooleanField()

    def __init__(self, ids: Sequence[uuid.UUID] | str) -> None:
        super().__init__(F("id"))
        self.ids = ids

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, list[Any]]:
        column, params = compiler.compile(self.get_source_expressions()[0])
        return f"{column} = ANY(%s::uuid[])", [*params, self.ids]


class AsksQuestion(Func):
    """The memory's text is a question: its last character, trailing whitespace aside, is a question mark (Latin,
    full-width or Arabic). Read from the text rather than stored: one comparison on a row the read has in hand."""

    template = "(right(rtrim(%(expressions)s, E' \\t\\r\\n'), 1) IN ('?', '\uff1f', '\u061f'))"
    output_field = BooleanField()

    def __init__(self) -> None:
        super().__init__(F("text"))


def distance_to(embedding: QueryEmbedding) -> Case:
    """Cosine distance to the query, NULL for a row without a vector of the query's model and size (not embedded
    yet): pgvector refuses to compare vectors of two sizes, so the CASE never reaches one."""
    embedded = Q(embedding__isnull=False, embedding_model=embedding.model_id) & vector_index.same_dimensions(
        len(embedding.vector)
    )
    return Case(When(embedded, then=vector_index.exact_distance(embedding.vector)), output_field=FloatField())
