"""bench_knowledge_search runs end to end on a tiny corpus (its figures are for humans, never asserted)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from knowledge.models import Article

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "heavy_read"],
    available_apps=["loopmem", "projects", "memory", "knowledge", "bench"],
)


def bench(queries: int) -> dict[str, Any]:
    out = io.StringIO()
    call_command(
        "bench_knowledge_search", "--articles", "40", "--queries", str(queries), "--warm-up", "0", "--json", stdout=out
    )
    summary: dict[str, Any] = json.loads(out.getvalue())
    return summary


def test_the_benchmark_builds_its_corpus_once_and_reports_every_mode():
    summary = bench(3)
    assert summary["articles"] == 40
    assert set(summary["selector_ms"]["typical"]) == {"keyword", "semantic", "combined"}
    assert set(summary["selector_ms"]["broad"]) == {"keyword", "combined"}
    assert summary["selector_ms"]["typical"]["combined"]["n"] == 3
    assert summary["semantic_recall_vs_exact"]["ids"] == 1.0  # 40 visible rows: the exact read answers
    first_ids = set(Article.objects.values_list("id", flat=True))
    bench(1)
    assert set(Article.objects.values_list("id", flat=True)) == first_ids  # the corpus is reused
