"""How /knowledge/search orders its pool (knowledge.ordering): a curated winner pinned first, then the diversity
selector merged recall uses, reordering (never reducing) the pool, with `meta.diversity`."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from loopmem.database.router import HEAVY_READ_ALIAS
from tests.factories import embedded_article
from tests.knowledge.conftest import hashed, heavy_db, search

pytestmark = heavy_db

QUERY = "roll back a release"


def ids(body):
    return [hit["id"] for hit in body["data"]]


@pytest.fixture
def keyword_first_and_a_clear_winner(tenant):
    """The keyword lane ranks `keyword_first` first; `winner` is the query's meaning and matches no keyword."""
    keyword_first = embedded_article(
        tenant, "Roll back a release", "roll back release steps", embedding=hashed("the office cat likes fish")
    )
    winner = embedded_article(tenant, "Zebra handbook", "crossing stripes", embedding=hashed(QUERY))
    for n, text in enumerate(["quarterly budget review", "printer toner supplier", "holiday rota for december"]):
        embedded_article(tenant, f"Other {n}", text, embedding=hashed(text))
    return keyword_first, winner


@pytest.mark.parametrize("diversity", [True, False])
def test_a_clear_winner_is_curated_and_pinned_first_over_the_fusion(agent, keyword_first_and_a_clear_winner, diversity):
    keyword_first, winner = keyword_first_and_a_clear_winner
    with override_settings(RECALL_DIVERSITY_ENABLED=diversity):
        body = search(agent, QUERY)
        fused = search(agent, QUERY, mode="keyword")
    assert ids(fused)[0] == str(keyword_first.id)
    meta = body["meta"]
    assert (meta["provenance"], meta["curated_article_id"]) == ("curated", str(winner.id))
    assert meta["confidence"] == pytest.approx(1.0)
    assert ids(body)[0] == str(winner.id)  # provenance curated guarantees the first row is the governed answer
    assert str(keyword_first.id) in ids(body)


def test_twins_are_not_curated_and_the_near_duplicate_goes_last(agent, tenant):
    first = embedded_article(tenant, "Release rollback", "roll back a release", embedding=hashed(QUERY))
    twin = embedded_article(tenant, "Release rollback again", "roll back a release again", embedding=hashed(QUERY))
    others = [
        embedded_article(tenant, f"Release note {n}", f"release {text}", embedding=hashed(f"roll back {text}"))
        for n, text in enumerate(["on friday", "after the smoke test", "through the router"])
    ]
    body = search(agent, QUERY)
    meta = body["meta"]
    assert (meta["provenance"], meta["curated_article_id"]) == ("retrieved", None)  # no margin between the twins
    assert meta["diversity"]["dropped_near_duplicates"] == 1
    assert (meta["diversity"]["enabled"], meta["diversity"]["candidates"]) == (True, 5)
    found = ids(body)
    assert len(found) == meta["total_count"] == 5  # reordered, never reduced
    assert {found[0], found[-1]} == {str(first.id), str(twin.id)}  # one twin leads, the other is demoted last
    assert set(found[1:4]) == {str(a.id) for a in others}

    with override_settings(RECALL_DIVERSITY_ENABLED=False):
        plain = search(agent, QUERY)
    assert plain["meta"]["diversity"]["enabled"] is False
    assert set(ids(plain)[:2]) == {str(first.id), str(twin.id)}  # without the selector the twins lead together


def test_paging_one_query_partitions_the_reordered_pool(agent, tenant):
    embedded_article(tenant, "Release rollback", "roll back a release", embedding=hashed(QUERY))
    embedded_article(tenant, "Release rollback again", "roll back a release again", embedding=hashed(QUERY))
    for n, text in enumerate(["on friday", "after the smoke test", "through the router"]):
        embedded_article(tenant, f"Release note {n}", f"release {text}", embedding=hashed(f"roll back {text}"))
    pages = [search(agent, QUERY, limit=2, offset=offset) for offset in (0, 2, 4)]
    seen = [article_id for page in pages for article_id in ids(page)]
    assert len(seen) == len(set(seen)) == 5
    assert all(page["meta"]["diversity"]["dropped_near_duplicates"] == 1 for page in pages)


def test_without_an_embedding_the_search_is_retrieved_with_a_keyword_confidence(agent, tenant, embedding_down):
    embedded_article(tenant, "Roll back a release", "roll back release steps")
    body = search(agent, QUERY)
    meta = body["meta"]
    assert (meta["search_mode"], meta["provenance"], meta["curated_article_id"]) == ("keyword_only", "retrieved", None)
    score = body["data"][0]["score"]
    assert meta["confidence"] == pytest.approx(score / (score + 1))


def test_nothing_found_has_no_provenance(agent, tenant):
    meta = search(agent, QUERY)["meta"]
    assert (meta["provenance"], meta["curated_article_id"], meta["confidence"]) == (None, None, None)


def test_only_the_selectors_window_has_its_vectors_read(agent, tenant):
    for n in range(12):
        embedded_article(tenant, f"Release note {n}", f"roll back release step {n}", embedding=hashed(f"step {n}"))
    with CaptureQueriesContext(connections[HEAVY_READ_ALIAS]) as captured:
        body = search(agent, QUERY, limit=2)
    reads = [q["sql"] for q in captured.captured_queries if "halfvec_send" in q["sql"]]
    assert len(reads) == 1  # one read by id, not a vector with every pooled row of both lanes
    diversity = body["meta"]["diversity"]
    assert diversity["candidates"] == diversity["vectors_available"] == 6  # the window: pool_size(2) = 6 of 12
