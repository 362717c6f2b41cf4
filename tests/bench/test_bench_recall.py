"""bench_recall runs end to end on a tiny diluted corpus, filtered pass included (latencies are for humans)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from memory.models import Memory

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "heavy_read"],
    available_apps=["loopmem", "projects", "memory", "knowledge", "bench"],
)


def test_the_filtered_pass_is_complete_and_printed_next_to_the_unfiltered_one():
    out = io.StringIO()
    call_command(
        "bench_recall", "--rows", "1200", "--subjects", "12", "--queries", "4", "--remember", "3", "--json", stdout=out
    )
    summary = json.loads(out.getvalue())
    # One row in ten of every subject carries the filter tag.
    assert Memory.objects.filter(tags__contains=["bench-tenth"]).count() == 120
    [figures] = summary["passes"]
    filtered = figures["filtered"]
    assert filtered["filters"] == {"tags": ["bench-tenth"]}
    assert set(filtered["service"]) == {"auto", "exact", "ann", "ann +hnsw"}
    for label, mode in filtered["service"].items():
        assert mode["recall_at_10"]["min"] == 1.0, label
    assert figures["goals"]["filtered_recall_at_10_is_1_for_every_sampled_subject"] is True

    human = io.StringIO()
    call_command("bench_recall", "--rows", "1200", "--subjects", "12", "--queries", "2", "--remember", "2", "--reuse",
                 stdout=human)  # fmt: skip
    assert "unfilt p95" in human.getvalue()
