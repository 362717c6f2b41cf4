"""bench_local_embedder times the local MiniLM embedder (its figures are for humans, never asserted)."""

from __future__ import annotations

import io
import json

from django.core.management import call_command


def test_the_benchmark_embeds_both_kinds_of_text_in_the_pipelines_call_size():
    out = io.StringIO()
    call_command("bench_local_embedder", "--texts", "6", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["texts"] == 6
    assert summary["model"] == "stored"
    assert summary["call_size"] == 32
    assert set(summary["kinds"]) == {"conversation turns", "short facts"}
    for figures in summary["kinds"].values():
        assert figures["texts_per_second"] > 0
        assert figures["characters_max"] >= figures["characters_p50"] > 0


def test_the_benchmark_times_the_distillers_int8_arithmetic_model_when_asked():
    out = io.StringIO()
    call_command("bench_local_embedder", "--texts", "6", "--model", "int8-arithmetic", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["model"] == "int8-arithmetic"
    assert all(figures["texts_per_second"] > 0 for figures in summary["kinds"].values())
