"""bench_embed_overhead times embed_texts against a loopback embedder (its figures are for humans, never asserted)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from bench import loopback_embedder

pytestmark = pytest.mark.django_db


def _run(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("bench_embed_overhead", "--calls", "5", "--json", *args, stdout=out)
    summary: dict[str, Any] = json.loads(out.getvalue())
    return summary


def test_the_benchmark_starts_its_own_embedder_and_keeps_both_connections_alive():
    summary = _run()
    assert summary["calls"] == 5
    assert summary["embedder"] == "this process (a thread)"
    assert summary["connections_opened"] == 2  # the raw client's and the SDK's pool's: kept alive, not one per call
    assert set(summary["overhead_ms"]) >= {"p50", "p95", "p99"}


def test_the_benchmark_measures_a_running_embedder_and_counts_its_connections_through_stats():
    with loopback_embedder.running() as server:
        summary = _run("--embedder-url", server.url)
        assert server.calls == 5 + 20 + 5 + 20  # both clients, warm-up pairs included: nothing else reached it
    assert summary["embedder"] == f"a separate process at {server.url}"
    assert summary["connections_opened"] == 2
