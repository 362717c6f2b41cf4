"""Each row of the answer-confidence table (reference §4.9, newest version): merged recall's knowledge verdict."""

from __future__ import annotations

import pytest

from recall.knowledge_verdict import knowledge_verdict


@pytest.mark.parametrize(
    ("scores", "ids", "curated", "verdict"),
    [
        ([], [], None, "none"),  # no knowledge rows
        ([], [], "k1", "none"),  # curated provenance cannot answer without rows
        ([0.1, 0.9], ["k1", "k2"], "k1", "answer"),  # the curated article is among the rows
        ([0.9, 0.1, 0.1], ["k1", "k2", "k3"], "gone", "answer"),  # curated id not present: separation decides
        ([0.9], ["k1"], None, "weak"),  # a single score
        ([None, None], ["k1", "k2"], None, "weak"),  # rows without scores are excluded
        ([0.9, None], ["k1", "k2"], None, "weak"),
        ([0.9, 0.6], ["k1", "k2"], None, "answer"),  # 0.9 / 0.6 = 1.5 exactly
        ([0.89, 0.6], ["k1", "k2"], None, "weak"),  # just under the separation
        ([0.9, 0.8, 0.2], ["k1", "k2", "k3"], None, "answer"),  # median of [0.8, 0.2] = 0.5
        ([0.9, 0.8, 0.7, 0.1], ["a", "b", "c", "d"], None, "weak"),  # median of rest 0.7: 1.29
        ([0.5, 0.0, 0.0], ["k1", "k2", "k3"], None, "weak"),  # a zero median is weak
    ],
)
def test_the_verdict_table(scores, ids, curated, verdict):
    assert knowledge_verdict(knowledge_scores=scores, knowledge_ids=ids, curated_article_id=curated) == verdict
