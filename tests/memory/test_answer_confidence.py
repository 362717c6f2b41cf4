"""Memory recall's separation grade (memory.separation_grade, the wire's `meta.answer_confidence` of keyword and
hybrid recall): the knowledge separation rule, graded; and the rule itself."""

from __future__ import annotations

import pytest

from loopmem.ranking.separation import separation
from memory.separation_grade import separation_grade


@pytest.mark.parametrize(
    ("scores", "verdict"),
    [
        ([], "none"),  # nothing found
        ([0.9], "low"),  # a single hit: nothing to separate it from
        ([0.9, 0.45, 0.45], "high"),  # 0.9 / 0.45 = 2.0 exactly
        ([0.89, 0.45, 0.45], "medium"),  # just under 2
        ([0.9, 0.6], "medium"),  # 1.5 exactly: the knowledge rule's "answer"
        ([0.89, 0.6], "low"),  # just under 1.5
        ([0.9, 0.8, 0.2], "medium"),  # median of [0.8, 0.2] = 0.5: 1.8
        ([0.5, 0.0, 0.0], "low"),  # a zero median decides nothing
        ([1.0, *[0.9] * 9, *[0.1] * 20], "low"),  # only the top 10 count: the tail does not fake a separation
    ],
)
def test_the_verdict_table(scores, verdict):
    assert separation_grade(scores) == verdict


@pytest.mark.parametrize(
    ("scores", "ratio"),
    [
        ([], None),
        ([0.5], None),
        ([None, 0.5], None),  # rows without a score are left out
        ([0.5, 0.0], None),  # a zero median
        ([0.2, 0.8, 0.4], 0.8 / 0.3),  # sorted first: the top over the median of the rest
        ([0.9, None, 0.3], 3.0),
    ],
)
def test_separation(scores, ratio):
    assert separation(scores) == (None if ratio is None else pytest.approx(ratio))
