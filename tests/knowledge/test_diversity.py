"""The diversity selector (reference §4.7), stage by stage, with its counts."""

from __future__ import annotations

import pytest

from knowledge.diversity import Candidate, DiversityConfig, cosine, select

ON = DiversityConfig(enabled=True, lambda_=0.7, near_dup_threshold=0.95)
X, Y, Z = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
XY = [0.7, 0.7, 0.0]


def c(id_, score, vector=None, content_hash=None):
    return Candidate(id=id_, score=score, content_hash=content_hash, vector=vector)


def ids(chosen):
    return [candidate.id for candidate in chosen]


def test_disabled_takes_the_top_n_and_reports_it():
    chosen, stats = select([c("a", 0.9, X), c("b", 0.8, X), c("c", 0.7)], 2, DiversityConfig(enabled=False))
    assert ids(chosen) == ["a", "b"]
    assert stats.as_meta() == {
        "enabled": False, "lambda": 0.7, "near_dup_threshold": 0.95, "candidates": 3, "selected": 2,
        "dropped_already_seen": 0, "readmitted_already_seen": 0, "dropped_exact_duplicates": 0,
        "dropped_near_duplicates": 0, "vectors_available": 2,
    }  # fmt: skip


def test_a_non_positive_limit_selects_nothing():
    chosen, stats = select([c("a", 1.0)], 0, ON)
    assert (chosen, stats.enabled) == ([], False)


def test_near_duplicate_twins_collapse_and_the_slot_is_refilled():
    chosen, stats = select([c("a", 0.9, X), c("a-twin", 0.89, X), c("b", 0.5, Y)], 2, ON)
    assert ids(chosen) == ["a", "b"]
    assert stats.dropped_near_duplicates == 1


def test_exact_hash_twins_collapse_and_no_hash_is_no_fingerprint():
    pool = [c("a", 0.9, X, "h1"), c("a-copy", 0.8, Y, "h1"), c("n1", 0.7, Z, None), c("n2", 0.6, XY, "")]
    chosen, stats = select(pool, 4, ON)
    assert ids(chosen) == ["a", "n1", "n2"]
    assert stats.dropped_exact_duplicates == 1


def test_containment_drops_what_the_session_saw():
    pool = [c("seen", 0.9, X), c("b", 0.8, Y), c("c", 0.7, Z)]
    chosen, stats = select(pool, 2, ON, exclude_ids={"seen"})
    assert ids(chosen) == ["b", "c"]
    assert (stats.dropped_already_seen, stats.readmitted_already_seen) == (1, 0)


def test_no_containment_without_a_history():
    chosen, stats = select([c("seen", 0.9, X), c("b", 0.8, Y)], 2, ON)
    assert ids(chosen) == ["seen", "b"]
    assert stats.dropped_already_seen == 0


def test_the_floor_readmits_the_best_repeats_rather_than_leave_a_hole():
    pool = [c("s1", 0.9, X), c("s2", 0.8, Y), c("s3", 0.75, Z), c("new", 0.7, XY)]
    chosen, stats = select(pool, 3, ON, exclude_ids={"s1", "s2", "s3"})
    assert set(ids(chosen)) == {"new", "s1", "s2"}
    assert (stats.readmitted_already_seen, stats.dropped_already_seen) == (2, 1)


def test_a_candidate_without_a_vector_is_never_dropped_or_demoted():
    pool = [c("a", 0.9, X), c("blind", 0.85, None), c("a-twin", 0.8, X)]
    chosen, stats = select(pool, 2, ON)
    assert ids(chosen) == ["a", "blind"]
    assert stats.vectors_available == 2


def test_mmr_prefers_a_relevant_different_article_over_a_near_copy():
    near_copy = [0.9, 0.43, 0.0]  # cosine 0.90 to X: similar, under the 0.95 threshold
    chosen, _ = select([c("a", 0.9, X), c("similar", 0.85, near_copy), c("other", 0.7, Y)], 2, ON)
    assert ids(chosen) == ["a", "other"]


def test_lambda_one_with_threshold_two_is_diversity_off():
    pool = [c("a", 0.9, X), c("a-twin", 0.89, X), c("b", 0.5, Y), c("c", 0.4, Z)]
    off, _ = select(pool, 3, DiversityConfig(enabled=False))
    relevance_only, _ = select(pool, 3, DiversityConfig(enabled=True, lambda_=1.0, near_dup_threshold=2.0))
    assert [(x.id, x.score) for x in relevance_only] == [(x.id, x.score) for x in off]


def test_pinned_candidates_skip_every_drop_and_seed_the_selected_set():
    pinned = [c("curated", 0.1, X, "h")]
    chosen, stats = select([c("twin", 0.9, X), c("same-hash", 0.8, Y, "h"), c("b", 0.7, Z)], 2, ON, pinned=pinned)
    assert ids(chosen) == ["curated", "b"]
    assert (stats.dropped_near_duplicates, stats.dropped_exact_duplicates) == (1, 1)


@pytest.mark.parametrize(("limit", "pool"), [(5, 15), (10, 30), (20, 30), (50, 50)])
def test_the_pool_is_over_fetched(limit, pool):
    assert DiversityConfig().pool_size(limit) == pool
    assert DiversityConfig(enabled=False).pool_size(limit) == limit


def test_bad_overrides_fall_back_to_defaults_and_caps_apply(settings):
    config = DiversityConfig.from_settings(enabled="yes", lambda_=-1, near_dup_threshold=5.0, over_fetch=0)
    assert (config.enabled, config.lambda_, config.near_dup_threshold, config.over_fetch) == (True, 0.7, 2.0, 3)
    assert DiversityConfig.from_settings(lambda_=3).lambda_ == 1.0


def test_cosine_edges():
    assert cosine(X, X) == pytest.approx(1.0)
    assert cosine(X, [1.0, 0.0]) == 0.0
    assert cosine([0.0, 0.0, 0.0], X) == 0.0
    assert cosine(None, X) == 0.0
