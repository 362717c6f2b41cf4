"""bench_served's corpus: a build killed while it loaded memories, while it built the index, or while it wrote
articles continues from what it committed when the same command runs again, and ends with a whole build's corpus."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError
from django.db.models.query import QuerySet

from bench import scale_corpus, served
from bench.management.commands import bench_merged_recall
from knowledge.models import Article
from tests.bench.kills import Killed, kill_the_load_inside_its_second_chunk

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "heavy_read"], available_apps=["loopmem", "projects", "memory", "knowledge"]
)

ROWS = 2 * scale_corpus.CHUNK_ROWS + 500
SUBJECTS = 9
ARTICLES = 1_305  # 105 near the queries (4 hubs of 2 subjects at 500 rows each) and 1,200 in the background


def prepare(slug: str, *, reuse: bool = False) -> bool:
    _, _, built = served.prepare(
        slug=slug,
        rows=ROWS,
        subjects=SUBJECTS,
        articles=ARTICLES,
        reuse=reuse,
        seed=7,
        embedder_url="http://127.0.0.1:9/v1",
        build_articles=bench_merged_recall.build_articles,
    )
    return built


def articles_of(slug: str) -> list[tuple[str, str, str]]:
    rows = Article.objects.filter(tenant__slug=slug).values_list("title", "body", "owner_subject_id")
    return sorted(rows)


def test_a_served_build_killed_at_each_stage_continues_to_the_corpus_of_a_whole_build(monkeypatch):
    with monkeypatch.context() as patched:
        kill_the_load_inside_its_second_chunk(patched)
        with pytest.raises(Killed):
            prepare("served-resumed")

    # Run again, killed while the index is built: every memory is in, the index is not.
    build_index = scale_corpus.build_hnsw_index

    def killed_while_indexing(*args: object, **kwargs: object) -> float:
        scale_corpus.drop_hnsw_index()
        raise Killed

    monkeypatch.setattr(scale_corpus, "build_hnsw_index", killed_while_indexing)
    with pytest.raises(Killed):
        prepare("served-resumed")
    monkeypatch.setattr(scale_corpus, "build_hnsw_index", build_index)
    assert not scale_corpus.has_hnsw_index()

    # Run again, killed inside the background articles' second batch.
    bulk_create = QuerySet.bulk_create
    batches = 0

    def killed_in_the_second_batch(self: QuerySet[Article], objs: list[Article], *args: object, **kwargs: object):
        nonlocal batches
        batches += 1
        if batches == 2:
            raise Killed
        return bulk_create(self, objs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(QuerySet, "bulk_create", killed_in_the_second_batch)
    with pytest.raises(Killed):
        prepare("served-resumed")
    monkeypatch.setattr(QuerySet, "bulk_create", bulk_create)
    assert scale_corpus.has_hnsw_index()
    assert Article.objects.filter(tenant__slug="served-resumed").count() == 500  # the first batch, committed

    inserted = 0

    def counted(self: QuerySet[Article], objs: list[Article], *args: object, **kwargs: object):
        nonlocal inserted
        inserted += len(objs)
        return bulk_create(self, objs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(QuerySet, "bulk_create", counted)
    assert prepare("served-resumed") is True  # the same command, no --reuse: it continues
    monkeypatch.setattr(QuerySet, "bulk_create", bulk_create)
    assert inserted == ARTICLES - 500  # after the committed batch, not from the start
    assert prepare("served-whole") is True
    assert articles_of("served-resumed") == articles_of("served-whole")
    assert len(articles_of("served-whole")) == ARTICLES

    with pytest.raises(CommandError, match="pass --reuse"):
        prepare("served-resumed")
    assert prepare("served-resumed", reuse=True) is False


def test_a_whole_corpus_whose_index_is_missing_gets_it_back(monkeypatch):
    prepare("served-indexed")
    scale_corpus.drop_hnsw_index()
    assert prepare("served-indexed", reuse=True) is True
    assert scale_corpus.has_hnsw_index()
