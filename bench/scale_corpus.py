"""Deterministic synthetic memory corpora for the recall scale test and the recall benchmark.

Vectors are synthetic unit vectors (numpy, seeded), but every *query* vector is the `hashing` provider's
embedding of a query text, and rows carry the hashing model id. So one corpus can be read both through
`recall_by_vector` with a precomputed vector and through POST /api/v1/memory/recall, which embeds the text.

Rows are bulk-loaded with COPY, one committed COPY per chunk of CHUNK_ROWS: a build that was killed continues from
the chunks it committed (each chunk's rows and vectors depend only on the seed and the chunk's number). The partial
HNSW index is dropped before the load and rebuilt after it: inserting 10^5 rows into a live HNSW graph costs far
more than one build.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import psutil
from django.db import connection, transaction
from django.db.models import Index
from django.utils import timezone

from loopmem.embedding import embedders
from memory.models import Memory

Vectors = npt.NDArray[np.float32]

HASHING_MODEL_ID = embedders.EmbedderSpec(provider="hashing", model=embedders.DEFAULT_MODELS["hashing"]).model_id
NATIVE_DIMENSIONS = embedders.HashingEmbedder.dimensions  # what the hashing provider (and MiniLM) make


def model_id_for(dimensions: int) -> str:
    """The corpus's model: the hashing provider at its native 384 dims, else a synthetic model of that size (the
    hashing vector widened with zeros and noise: the storage and scan cost of a real model of that size)."""
    return HASHING_MODEL_ID if dimensions == NATIVE_DIMENSIONS else f"synthetic:hashing-{dimensions}"


def hnsw_index_name(dimensions: int = NATIVE_DIMENSIONS) -> str:
    """The partial HNSW index over the live rows of this size (loopmem.embedding.vector_index)."""
    return f"memories_hnsw_{dimensions}_idx"


HNSW_INDEX_NAME = hnsw_index_name()
# A build that spills past maintenance_work_mem is far slower: the graph of 200k x 1536-dim vectors is ~1.4 GB, about
# 1.2 x its vectors. The build gets that for every row of the table, at least 2 GB and at most half the machine.
INDEX_BUILD_MEMORY_FLOOR = 2 << 30
INDEX_BUILD_MEMORY_SHARE_OF_MACHINE = 0.5
CHUNK_ROWS = 2_000
DEFAULT_SEED = 20_240_611

NEEDLE_SUBJECT = "needle"
NEEDLE_ROWS = 50
HAYSTACK_SUBJECTS = 400
# Wider than the reference's pool (100 for k=10) and than hnsw.ef_search (100): a read that filters the
# subject only after the index has returned its candidates sees nothing but decoys.
DEFAULT_DECOYS = 200

# Diluted corpus: every query direction is the hub of at least this many foreign rows, so each subject's own
# rows rank below the global top 500.
HUB_ROWS = 600
GROUP_TOKENS = 8
SUBJECT_TOKENS = 2
NOISE_WEIGHT = 0.5

# One row in ten of every subject carries this tag (logical index % 10 == 0): the benchmark's filtered recall.
FILTER_TAG = "bench-tenth"
FILTER_EVERY = 10

COPY_SQL = (
    "COPY memories (id, tenant_id, subject_id, text, embedding, embedding_model, embedding_content_hash,"
    " confidence, source, tags, metadata, recall_count, inserted_at, updated_at) FROM STDIN"
)

Progress = Callable[[int], None]
Phase = Callable[[str], None]


def no_progress(_: int) -> None:
    """Default progress sink: report nothing."""


def no_phase(_: str) -> None:
    """Default phase sink: report nothing."""


@dataclass(frozen=True)
class LoadStats:
    """What loading a corpus cost."""

    rows: int
    dimensions: int
    copy_seconds: float
    index_seconds: float


@dataclass(frozen=True)
class NeedleCorpus:
    """Reference §7 item 30: one needle subject, a haystack, and a decoy band nearest to the needle's query."""

    tenant_id: uuid.UUID
    rows: int
    model_id: str
    query_text: str
    query_vector: list[float]
    needle_ids: frozenset[uuid.UUID]
    needle_top_ids: tuple[uuid.UUID, ...]  # by design, nearest first (the needle's exact top 10)
    decoy_ids: frozenset[uuid.UUID]
    load: LoadStats
    subject_id: str = NEEDLE_SUBJECT
    haystack_subjects: int = HAYSTACK_SUBJECTS


@dataclass(frozen=True)
class DilutedCorpus:
    """N rows over M subjects where each subject's own nearest rows lie outside the global top 500."""

    tenant_id: uuid.UUID
    rows: int
    subjects: tuple[str, ...]
    group_size: int
    model_id: str
    load: LoadStats

    def query_text(self, subject: str) -> str:
        return diluted_query_text(self.subjects.index(subject), self.group_size, len(self.subjects))

    def query_vector(self, subject: str) -> list[float]:
        return [float(x) for x in query_vector(self.query_text(subject), self.load.dimensions)]


# --- Query vectors ---------------------------------------------------------------------------------------


def query_vector(text: str, dimensions: int = NATIVE_DIMENSIONS) -> Vectors:
    """The hashing provider's embedding of `text` (what the endpoint computes), widened with zeros to `dimensions`
    for a synthetic larger model."""
    [raw] = embedders.HashingEmbedder().embed([text])
    return np.asarray([*raw, *([0.0] * (dimensions - len(raw)))], dtype=np.float32)


def needle_query_text() -> str:
    # Tokens no other text of the corpus uses: its hashing features belong to the needle query alone.
    return " ".join(f"needlequery{i}" for i in range(16))


def group_count(subjects: int, group_size: int) -> int:
    return max(1, subjects // group_size)


def diluted_group_of(subject: int, group_size: int, subjects: int) -> int:
    # The trailing partial group joins the last full one, so every hub keeps at least group_size subjects.
    return min(subject // group_size, group_count(subjects, group_size) - 1)


def diluted_group_text(group: int) -> str:
    return " ".join(f"g{group}w{i}" for i in range(GROUP_TOKENS))


def diluted_query_text(subject: int, group_size: int, subjects: int) -> str:
    """Group tokens plus the subject's own: the query points at its group's center, with a subject-own part."""
    group = diluted_group_of(subject, group_size, subjects)
    own = " ".join(f"s{subject}u{i}" for i in range(SUBJECT_TOKENS))
    return f"{diluted_group_text(group)} {own}"


def diluted_subject(subject: int) -> str:
    return f"subject-{subject:05d}"


# --- Geometry --------------------------------------------------------------------------------------------


def _unit_rows(rng: np.random.Generator, count: int, dimensions: int) -> Vectors:
    noise = rng.standard_normal((count, dimensions), dtype=np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    return noise


def _at_cosine(query: Vectors, cosines: Vectors, noise: Vectors) -> Vectors:
    """Unit rows whose cosine to the unit `query` is exactly `cosines` (noise made orthogonal to the query)."""
    orthogonal = noise - np.outer(noise @ query, query)
    orthogonal /= np.linalg.norm(orthogonal, axis=1, keepdims=True)
    sines = np.sqrt(1.0 - cosines**2)
    rows: Vectors = (cosines[:, None] * query[None, :] + sines[:, None] * orthogonal).astype(np.float32)
    return rows


@dataclass(frozen=True)
class _Plan:
    """Rows in logical order (index = id seed) plus the order they are inserted in."""

    subjects: Sequence[str]
    subject_of: npt.NDArray[np.int64]
    texts: Callable[[int], str]
    vectors: Callable[[npt.NDArray[np.int64], np.random.Generator], Vectors]
    insert_order: npt.NDArray[np.int64]

    @property
    def rows(self) -> int:
        return len(self.subject_of)


def _needle_plan(rows: int, decoys: int, seed: int, dimensions: int) -> tuple[_Plan, Vectors, npt.NDArray[np.float32]]:
    if rows < NEEDLE_ROWS + decoys + HAYSTACK_SUBJECTS:
        raise ValueError(f"a needle corpus needs at least {NEEDLE_ROWS + decoys + HAYSTACK_SUBJECTS} rows")
    rng = np.random.default_rng(seed)
    query = query_vector(needle_query_text(), dimensions)
    # Logical layout: needle rows, then decoys, then haystack. Cosines are spaced far above float rounding, so
    # the exact top 10 is known by design and has no near-ties.
    cosines = np.zeros(rows, dtype=np.float32)
    cosines[:NEEDLE_ROWS] = rng.permutation(np.linspace(0.45, 0.70, NEEDLE_ROWS, dtype=np.float32))
    cosines[NEEDLE_ROWS : NEEDLE_ROWS + decoys] = rng.permutation(np.linspace(0.80, 0.95, decoys, dtype=np.float32))
    subjects = [NEEDLE_SUBJECT, *(f"haystack-{i:03d}" for i in range(HAYSTACK_SUBJECTS))]
    subject_of = np.zeros(rows, dtype=np.int64)
    subject_of[NEEDLE_ROWS:] = 1 + rng.integers(0, HAYSTACK_SUBJECTS, rows - NEEDLE_ROWS)

    def vectors(logical: npt.NDArray[np.int64], chunk_rng: np.random.Generator) -> Vectors:
        noise = _unit_rows(chunk_rng, len(logical), len(query))
        near = cosines[logical] > 0
        out = noise
        out[near] = _at_cosine(query, cosines[logical][near], noise[near])
        return out

    def text(logical: int) -> str:
        kind = "needle" if logical < NEEDLE_ROWS else "decoy" if logical < NEEDLE_ROWS + decoys else "haystack"
        return f"synthetic {kind} memory {logical}"

    plan = _Plan(subjects, subject_of, text, vectors, rng.permutation(rows))
    return plan, query, cosines


def _diluted_plan(rows: int, subjects: int, seed: int, dimensions: int) -> tuple[_Plan, int]:
    per_subject = rows // subjects
    if per_subject < 10:
        raise ValueError("a diluted corpus needs at least 10 rows per subject")
    group_size = math.ceil(HUB_ROWS / per_subject)
    groups = group_count(subjects, group_size)
    if groups < 2:
        raise ValueError(f"a diluted corpus needs at least {2 * group_size} subjects at {per_subject} rows each")
    rng = np.random.default_rng(seed)
    centers = np.stack([query_vector(diluted_group_text(g), dimensions) for g in range(groups)])
    queries = np.stack([query_vector(diluted_query_text(s, group_size, subjects), dimensions) for s in range(subjects)])
    # A subject's rows sit on the *next* group's center (its hub), where they are foreign rows for every query
    # of that group; its own query reaches them only through the weaker subject-own part.
    hub_of = np.array([(diluted_group_of(s, group_size, subjects) + 1) % groups for s in range(subjects)])
    subject_of = np.sort(np.arange(rows, dtype=np.int64) % subjects)
    own_weight = rng.uniform(0.3, 0.6, rows).astype(np.float32)

    def vectors(logical: npt.NDArray[np.int64], chunk_rng: np.random.Generator) -> Vectors:
        owners = subject_of[logical]
        noise = _unit_rows(chunk_rng, len(logical), queries.shape[1])
        out = centers[hub_of[owners]] + own_weight[logical, None] * queries[owners] + NOISE_WEIGHT * noise
        rows: Vectors = (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)
        return rows

    def text(logical: int) -> str:
        return f"synthetic memory {logical} of {diluted_subject(int(subject_of[logical]))}"

    names = [diluted_subject(s) for s in range(subjects)]
    return _Plan(names, subject_of, text, vectors, rng.permutation(rows)), group_size


# --- Loading ---------------------------------------------------------------------------------------------


def row_id(tenant_id: uuid.UUID, logical: int) -> uuid.UUID:
    """Deterministic per tenant, so two corpora in one database never collide."""
    return uuid.uuid5(tenant_id, f"scale-row-{logical}")


def vector_literal(values: Sequence[float]) -> str:
    # pgvector's text format; 6 significant digits keep a unit vector unit to ~1e-6 at a third of repr's size.
    return "[" + ",".join(map("{:.6g}".format, values)) + "]"


def _chunks(plan: _Plan, seed: int, first: int = 0) -> Iterator[tuple[npt.NDArray[np.int64], Vectors]]:
    """The plan's rows chunk by chunk from chunk `first`: a chunk's vectors come from its own seeded generator."""
    for number in range(first, math.ceil(plan.rows / CHUNK_ROWS)):
        logical = plan.insert_order[number * CHUNK_ROWS : (number + 1) * CHUNK_ROWS]
        yield logical, plan.vectors(logical, np.random.default_rng([seed, number]))


def loaded_rows(tenant_id: uuid.UUID) -> int:
    """How many rows the tenant holds (a corpus loaded whole, or the chunks a killed build committed)."""
    return Memory.objects.for_tenant(tenant_id).count()


def _copy_rows(tenant_id: uuid.UUID, plan: _Plan, model_id: str, seed: int, progress: Progress) -> None:
    """COPY the plan's rows chunk by chunk, each committed, after the chunks already there."""
    done = loaded_rows(tenant_id)
    if done > plan.rows or (done % CHUNK_ROWS and done != plan.rows):
        raise ValueError(f"the tenant holds {done} rows: not a part of this {plan.rows}-row corpus")
    progress(done)
    if done == plan.rows:
        return  # every chunk is in (the build was killed after its load)
    started = timezone.now() - timedelta(milliseconds=plan.rows)
    for logical, vectors in _chunks(plan, seed, first=done // CHUNK_ROWS):
        with transaction.atomic(), connection.cursor() as cursor, cursor.cursor.copy(COPY_SQL) as copy:
            for logical_index, vector in zip(logical.tolist(), vectors.tolist(), strict=True):
                copy.write_row(_row(tenant_id, plan, logical_index, vector, model_id, started))
        progress(len(logical))


def _row(
    tenant_id: uuid.UUID, plan: _Plan, logical: int, vector: list[float], model_id: str, started: datetime
) -> tuple[object, ...]:
    text = plan.texts(logical)
    at = started + timedelta(milliseconds=logical)
    content_hash = hashlib.sha256(text.encode()).hexdigest()
    subject = plan.subjects[int(plan.subject_of[logical])]
    identity = (row_id(tenant_id, logical), tenant_id, subject, text, vector_literal(vector), model_id, content_hash)
    # confidence, source, tags, metadata, recall_count, inserted_at, updated_at
    tags = f"{{{FILTER_TAG}}}" if logical % FILTER_EVERY == 0 else "{}"
    defaults = (1.0, Memory.Source.EXPLICIT.value, tags, "{}", 0, at, at)
    return identity + defaults


def _hnsw_index(dimensions: int) -> Index:
    name = hnsw_index_name(dimensions)
    for index in Memory._meta.indexes:
        if isinstance(index, Index) and index.name == name:
            return index
    raise LookupError(f"Memory declares no index {name}")


def has_hnsw_index(dimensions: int = NATIVE_DIMENSIONS) -> bool:
    """False after a build killed while its index was being built (the load drops it first)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [hnsw_index_name(dimensions)])
        return cursor.fetchone() is not None


def drop_hnsw_index(dimensions: int = NATIVE_DIMENSIONS) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {hnsw_index_name(dimensions)}")


def index_build_memory(rows: int, dimensions: int) -> int:
    """Bytes of maintenance_work_mem for an HNSW build over `rows` vectors: the graph, within the floor and the cap.

    An element is its `halfvec` (2 bytes a component) and about 400 B of heap pointers, neighbour list and page slack
    (1,170 B an element measured at 384 dimensions: docs/performance.md, "Bytes per memory")."""
    graph = rows * (dimensions * 2 + 400)
    cap = int(psutil.virtual_memory().total * INDEX_BUILD_MEMORY_SHARE_OF_MACHINE)
    return max(INDEX_BUILD_MEMORY_FLOOR, min(graph, cap))


def build_hnsw_index(dimensions: int = NATIVE_DIMENSIONS) -> float:
    """(Re)create the partial HNSW index of this size from the model's declaration; returns the build seconds."""
    drop_hnsw_index(dimensions)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories")
        (rows,) = cursor.fetchone()
        memory_kb = index_build_memory(int(rows), dimensions) >> 10
        # Session-level: the build must hold the whole graph in memory or it slows down sharply.
        cursor.execute(f"SET maintenance_work_mem = '{memory_kb}kB'")
        # Vectors live in TOAST, so the heap looks tiny and the planner would build on one process; allow workers.
        cursor.execute("SET min_parallel_table_scan_size = 0")
        try:
            with connection.schema_editor() as editor:
                editor.add_index(Memory, _hnsw_index(dimensions))
        finally:
            cursor.execute("RESET maintenance_work_mem")
            cursor.execute("RESET min_parallel_table_scan_size")
    return time.perf_counter() - started


def _load(
    tenant_id: uuid.UUID,
    plan: _Plan,
    *,
    dimensions: int,
    model_id: str | None = None,
    seed: int,
    progress: Progress,
    phase: Phase,
) -> LoadStats:
    model_id = model_id or model_id_for(dimensions)
    phase("dropping the HNSW index")
    drop_hnsw_index(dimensions)
    copy_started = time.perf_counter()
    try:
        phase("loading rows (COPY)")
        _copy_rows(tenant_id, plan, model_id, seed, progress)
        copy_seconds = time.perf_counter() - copy_started
    finally:
        # Rebuilt even when the load fails: the rest of the database must not lose its index.
        phase("building the HNSW index")
        index_seconds = build_hnsw_index(dimensions)
    phase("analyzing")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories")
    return LoadStats(
        rows=plan.rows,
        dimensions=dimensions,
        copy_seconds=copy_seconds,
        index_seconds=index_seconds,
    )


# --- Ground truth ----------------------------------------------------------------------------------------


class Neighbour(NamedTuple):
    id: uuid.UUID
    subject_id: str
    distance: float


def exact_neighbours(
    *, tenant_id: uuid.UUID, vector: Sequence[float], k: int, subject_id: str | None = None, tag: str | None = None
) -> list[Neighbour]:
    """True kNN among the tenant's (or one subject's) live rows (carrying `tag`, when given), by SQL, independent
    of the recall code.

    A MATERIALIZED CTE cannot feed an index-ordered scan, so the HNSW index never answers this: nothing is
    approximate. Ties break by id, as the recall paths do.
    """
    subject_filter = "AND subject_id = %s" if subject_id is not None else ""
    params: list[str | int] = [str(tenant_id), len(vector), *([subject_id] if subject_id is not None else [])]
    if tag is not None:
        subject_filter += " AND tags @> ARRAY[%s]::varchar(200)[]"
        params.append(tag)
    sql = f"""
        WITH live AS MATERIALIZED (
            SELECT id, subject_id, embedding FROM memories
            WHERE tenant_id = %s AND superseded_by_id IS NULL AND embedding IS NOT NULL
              AND vector_dims(embedding) = %s {subject_filter}
        )
        SELECT id, subject_id, embedding <=> %s::halfvec AS distance FROM live ORDER BY distance, id LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, vector_literal(vector), k])
        return [Neighbour(*row) for row in cursor.fetchall()]


def float32_neighbours(
    corpus: DilutedCorpus, queries: Mapping[str, Sequence[float]], *, seed: int = DEFAULT_SEED, k: int = 10
) -> dict[str, tuple[uuid.UUID, ...]]:
    """Each queried subject's exact top k on the vectors the build generated, in float32: the answer before the
    column's half precision (and the load's 6-digit text) rounded them. Regenerates the corpus chunk by chunk, as the
    build does, keeping only the queried subjects' rows."""
    plan, _ = _diluted_plan(corpus.rows, len(corpus.subjects), seed, corpus.load.dimensions)
    index_of = {name: n for n, name in enumerate(corpus.subjects)}
    wanted = {index_of[subject]: np.asarray(vector, dtype=np.float32) for subject, vector in queries.items()}
    found: dict[int, list[tuple[float, uuid.UUID]]] = {n: [] for n in wanted}
    for logical, vectors in _chunks(plan, seed):
        owners = plan.subject_of[logical]
        for position in np.flatnonzero(np.isin(owners, list(wanted))):
            owner = int(owners[position])
            query = wanted[owner]
            row = vectors[position]
            cosine = float(row @ query) / float(np.linalg.norm(row) * np.linalg.norm(query))
            found[owner].append((1.0 - cosine, row_id(corpus.tenant_id, int(logical[position]))))
    return {corpus.subjects[n]: tuple(i for _, i in sorted(rows)[:k]) for n, rows in found.items()}


def rows_nearer(*, tenant_id: uuid.UUID, vector: Sequence[float], distance: float) -> int:
    """How many of the tenant's live rows lie strictly nearer to `vector` than `distance` (exact)."""
    sql = """
        WITH live AS MATERIALIZED (
            SELECT embedding FROM memories
            WHERE tenant_id = %s AND superseded_by_id IS NULL AND embedding IS NOT NULL AND vector_dims(embedding) = %s
        )
        SELECT count(*) FROM live WHERE embedding <=> %s::halfvec < %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [str(tenant_id), len(vector), vector_literal(vector), distance])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def ensure_filter_tag(*, tenant_id: uuid.UUID, rows: int) -> int:
    """Tag one row in ten as a corpus built now is tagged, for a corpus built before the tag existed (--reuse).

    Returns how many rows were tagged now (0 when the corpus already carries the tag).
    """
    if Memory.objects.for_tenant(tenant_id).filter(tags__contains=[FILTER_TAG]).exists():
        return 0
    ids = [str(row_id(tenant_id, logical)) for logical in range(0, rows, FILTER_EVERY)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories SET tags = ARRAY[%s]::varchar(200)[] WHERE tenant_id = %s AND id = ANY(%s::uuid[])",
            [FILTER_TAG, str(tenant_id), ids],
        )
        tagged: int = cursor.rowcount
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories")
    return tagged


# --- Entry points ----------------------------------------------------------------------------------------


def build_needle_corpus(
    *,
    tenant_id: uuid.UUID,
    rows: int = 80_000,
    decoys: int = DEFAULT_DECOYS,
    seed: int = DEFAULT_SEED,
    dimensions: int = NATIVE_DIMENSIONS,
    progress: Progress = no_progress,
    phase: Phase = no_phase,
) -> NeedleCorpus:
    """Load the needle corpus into `tenant_id`: needle, decoys and haystack interleaved in insertion order."""
    plan, query, cosines = _needle_plan(rows, decoys, seed, dimensions)
    load = _load(tenant_id, plan, dimensions=dimensions, seed=seed, progress=progress, phase=phase)
    needle = range(NEEDLE_ROWS)
    by_cosine = sorted(needle, key=lambda i: -float(cosines[i]))
    return NeedleCorpus(
        tenant_id=tenant_id,
        rows=rows,
        model_id=model_id_for(dimensions),
        query_text=needle_query_text(),
        query_vector=[float(x) for x in query],
        needle_ids=frozenset(row_id(tenant_id, i) for i in needle),
        needle_top_ids=tuple(row_id(tenant_id, i) for i in by_cosine[:10]),
        decoy_ids=frozenset(row_id(tenant_id, i) for i in range(NEEDLE_ROWS, NEEDLE_ROWS + decoys)),
        load=load,
    )


def build_diluted_corpus(
    *,
    tenant_id: uuid.UUID,
    rows: int,
    subjects: int,
    seed: int = DEFAULT_SEED,
    dimensions: int = NATIVE_DIMENSIONS,
    progress: Progress = no_progress,
    phase: Phase = no_phase,
    model_id: str | None = None,
) -> DilutedCorpus:
    """Load the diluted corpus into `tenant_id` (at `dimensions`: 384 is the hashing model's own size), its rows
    tagged `model_id` (default: the hashing model's, or a synthetic one at another size; any model whose query
    vectors are the hashing provider's, such as the loopback embedder's, will do)."""
    model_id = model_id or model_id_for(dimensions)
    plan, group_size = _diluted_plan(rows, subjects, seed, dimensions)
    load = _load(tenant_id, plan, dimensions=dimensions, model_id=model_id, seed=seed, progress=progress, phase=phase)
    return diluted_corpus_shape(
        tenant_id=tenant_id, rows=rows, subjects=subjects, load=load, group_size=group_size, model_id=model_id
    )


def diluted_corpus_shape(
    *,
    tenant_id: uuid.UUID,
    rows: int,
    subjects: int,
    load: LoadStats,
    group_size: int | None = None,
    model_id: str | None = None,
) -> DilutedCorpus:
    """Describe an already-loaded diluted corpus (the benchmark's --reuse)."""
    if group_size is None:
        group_size = math.ceil(HUB_ROWS / (rows // subjects))
    return DilutedCorpus(
        tenant_id=tenant_id,
        rows=rows,
        subjects=tuple(diluted_subject(s) for s in range(subjects)),
        group_size=group_size,
        model_id=model_id or model_id_for(load.dimensions),
        load=load,
    )
