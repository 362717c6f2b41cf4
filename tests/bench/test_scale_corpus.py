"""The benchmark corpus loader: a build that was killed continues from the chunks it committed, and ends with the
same rows a whole build makes."""

from __future__ import annotations

import pytest

from bench import scale_corpus
from memory.models import Memory
from tests.bench.kills import Killed, kill_the_load_inside_its_second_chunk

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "heavy_read"], available_apps=["loopmem", "projects", "memory"]
)

ROWS = 2 * scale_corpus.CHUNK_ROWS + 500  # two whole chunks and a short one
SUBJECTS = 9


def vectors_by_logical_row(tenant_id) -> dict[int, tuple[float, ...]]:
    ids = {scale_corpus.row_id(tenant_id, logical): logical for logical in range(ROWS)}
    rows = Memory.objects.for_tenant(tenant_id).values_list("id", "embedding")
    return {ids[memory_id]: () if vector is None else tuple(map(float, vector)) for memory_id, vector in rows}


def test_a_killed_build_continues_from_its_committed_chunks_to_the_rows_of_a_whole_build(
    monkeypatch, tenant, other_tenant
):
    killed, whole = tenant, other_tenant
    with monkeypatch.context() as patched:
        kill_the_load_inside_its_second_chunk(patched)
        with pytest.raises(Killed):
            scale_corpus.build_diluted_corpus(tenant_id=killed.id, rows=ROWS, subjects=SUBJECTS)
    # The first chunk was committed; the second was being written when the build died, and left nothing.
    assert scale_corpus.loaded_rows(killed.id) == scale_corpus.CHUNK_ROWS

    resumed: list[int] = []
    scale_corpus.build_diluted_corpus(tenant_id=killed.id, rows=ROWS, subjects=SUBJECTS, progress=resumed.append)
    assert resumed[0] == scale_corpus.CHUNK_ROWS  # the progress starts where the killed build stopped
    assert sum(resumed) == ROWS

    scale_corpus.build_diluted_corpus(tenant_id=whole.id, rows=ROWS, subjects=SUBJECTS)
    assert vectors_by_logical_row(killed.id) == vectors_by_logical_row(whole.id)


def test_a_tenant_holding_rows_of_another_corpus_is_refused(tenant):
    Memory.objects.create(tenant=tenant, subject_id="someone", text="not a corpus row")
    with pytest.raises(ValueError, match="not a part of this"):
        scale_corpus.build_diluted_corpus(tenant_id=tenant.id, rows=ROWS, subjects=SUBJECTS)


def test_the_index_build_memory_holds_the_graph_within_a_floor_and_half_the_machine():
    assert scale_corpus.index_build_memory(1_000, 384) == scale_corpus.INDEX_BUILD_MEMORY_FLOOR
    two_million = scale_corpus.index_build_memory(2_000_000, 384)
    assert two_million == min(2_000_000 * (384 * 2 + 400), scale_corpus.index_build_memory(10**12, 384))
    assert scale_corpus.index_build_memory(10**12, 384) > scale_corpus.INDEX_BUILD_MEMORY_FLOOR


def test_the_float32_reference_is_the_stored_exact_top_10_up_to_half_precision(tenant):
    corpus = scale_corpus.build_diluted_corpus(tenant_id=tenant.id, rows=ROWS, subjects=SUBJECTS)
    queries = {subject: corpus.query_vector(subject) for subject in corpus.subjects}
    reference = scale_corpus.float32_neighbours(corpus, queries)
    for subject, vector in queries.items():
        stored = scale_corpus.exact_neighbours(tenant_id=tenant.id, vector=vector, k=ROWS, subject_id=subject)
        distance = {n.id: n.distance for n in stored}
        assert len(reference[subject]) == 10
        assert set(reference[subject]) <= set(distance)  # the subject's own rows
        # Every float32 neighbour is among the stored top 10, or ties its 10th place within half precision.
        tenth = stored[9].distance
        assert all(distance[i] <= tenth + 1e-3 for i in reference[subject]), subject
