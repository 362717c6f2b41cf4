"""Hybrid fusion (memory.fusion): the weighted sum of normalised lane scores, and session context."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from memory.checks import hybrid_weights_in_range
from memory.fusion import FusionWeights, LaneScores, fuse

A, B, C, D = (uuid.UUID(int=n) for n in range(1, 5))
EQUAL = FusionWeights(semantic=0.5, context=0.0)


def _scores(candidates, weights=EQUAL):
    return dict(fuse(candidates, weights))


def test_each_lane_is_divided_by_its_best_so_scales_do_not_matter():
    # Semantic similarities near 0.3 and keyword coverage near 1 weigh the same at w = 0.5.
    scores = _scores([LaneScores(A, semantic=0.3, keyword=None), LaneScores(B, semantic=0.15, keyword=1.0)])
    assert scores == {A: pytest.approx(0.5), B: pytest.approx(0.25 + 0.5)}


def test_a_row_both_lanes_rank_first_scores_one():
    assert _scores([LaneScores(A, 0.4, 0.8), LaneScores(B, 0.2, 0.4)])[A] == pytest.approx(1.0)


def test_the_semantic_weight_moves_the_mix():
    candidates = [LaneScores(A, semantic=0.4, keyword=0.1), LaneScores(B, semantic=0.1, keyword=0.4)]
    assert fuse(candidates, FusionWeights(semantic=0.8, context=0.0))[0][0] == A
    assert fuse(candidates, FusionWeights(semantic=0.2, context=0.0))[0][0] == B


def test_a_row_not_embedded_yet_is_judged_by_its_keyword_share_alone():
    scores = _scores([LaneScores(A, semantic=0.6, keyword=0.5), LaneScores(B, semantic=None, keyword=1.0)])
    assert scores[B] == pytest.approx(1.0)
    assert scores[A] == pytest.approx(0.5 + 0.25)


def test_a_row_inherits_context_from_its_predecessor_in_the_session():
    weights = FusionWeights(semantic=0.5, context=0.3)
    question = LaneScores(A, semantic=0.8, keyword=1.0)
    reply = LaneScores(B, semantic=0.1, keyword=None, previous_id=A)
    unrelated = LaneScores(C, semantic=0.1, keyword=None)
    scores = _scores([question, reply, unrelated], weights)
    assert scores[A] == pytest.approx(1.0 / 1.3)
    assert scores[B] == pytest.approx((0.5 * 0.1 / 0.8 + 0.3 * 1.0) / 1.3)
    assert scores[C] == pytest.approx((0.5 * 0.1 / 0.8) / 1.3)


def test_a_predecessor_outside_the_candidates_passes_nothing_on():
    weights = FusionWeights(semantic=0.5, context=0.3)
    scores = _scores([LaneScores(A, semantic=0.5, keyword=None, previous_id=D)], weights)
    assert scores[A] == pytest.approx(0.5 / 1.3)


def test_scores_stay_in_the_unit_interval_and_ties_break_by_id():
    weights = FusionWeights(semantic=0.5, context=0.3)
    candidates = [
        LaneScores(C, semantic=0.5, keyword=0.5),
        LaneScores(B, semantic=0.5, keyword=0.5, previous_id=C),
        LaneScores(A, semantic=0.5, keyword=0.5),
    ]
    ranked = fuse(candidates, weights)
    assert [row_id for row_id, _ in ranked] == [B, A, C]
    assert all(0.0 <= score <= 1.0 for _, score in ranked)


def test_no_lane_scores_at_all_is_zero_not_an_error():
    assert fuse([LaneScores(A, semantic=0.0, keyword=None)], EQUAL) == [(A, 0.0)]
    assert fuse([], EQUAL) == []


def test_a_question_keeps_only_its_share_in_its_own_rank_and_passes_all_of_it_on():
    weights = FusionWeights(semantic=0.5, context=0.3, question=0.6)
    question = LaneScores(A, semantic=0.8, keyword=1.0, asks=True)
    answer = LaneScores(B, semantic=0.6, keyword=None, previous_id=A)
    scores = _scores([question, answer], weights)
    assert scores[A] == pytest.approx(0.6 * 1.0 / 1.3)
    assert scores[B] == pytest.approx((0.5 * 0.6 / 0.8 + 0.3 * 1.0) / 1.3)  # the question's whole own score
    assert scores[B] > scores[A]
    # The default share is 1: a question is ranked like any other memory.
    assert _scores([question, answer], FusionWeights(semantic=0.5, context=0.3))[A] == pytest.approx(1.0 / 1.3)


@pytest.mark.parametrize(
    ("name", "value", "ok"),
    [
        ("RECALL_HYBRID_QUESTION_SHARE", 0.6, True),
        ("RECALL_HYBRID_QUESTION_SHARE", 1.5, False),
        ("RECALL_HYBRID_QUESTION_SHARE", -0.1, False),
        ("RECALL_HYBRID_SEMANTIC_WEIGHT", 1.2, False),
        ("RECALL_HYBRID_CONTEXT_WEIGHT", 3.0, True),
        ("RECALL_HYBRID_CONTEXT_WEIGHT", -1.0, False),
        ("RECALL_HYBRID_TIME_WEIGHT", -0.5, False),
    ],
)
def test_the_system_check_keeps_the_fusion_weights_where_scores_stay_in_the_unit_interval(name, value, ok):
    with override_settings(**{name: value}):
        errors = hybrid_weights_in_range(None)
        assert (errors == []) is ok
        if not ok:
            assert [error.id for error in errors] == ["memory.E003"]
            assert f"LOOPMEM_{name}" in errors[0].msg
