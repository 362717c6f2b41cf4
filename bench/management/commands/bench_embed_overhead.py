"""bench_embed_overhead: what `embed_texts` adds over the provider's own HTTP round trip (goal: at most 1 ms)."""

from __future__ import annotations

import os
from argparse import ArgumentParser
from typing import Any

from bench import embed_overhead, loopback_embedder
from loopmem.management.operator import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Time, pair by pair, a raw kept-alive HTTP POST against embed_texts for a tenant on the openai provider, both "
        "against a loopback OpenAI-compatible embedder (started in this process, or a running one with "
        "--embedder-url): p50/p95/p99 of each and of the difference (the SDK, the circuit breaker, decoding, the size "
        "check). Uses this process's database and Redis; prints the load average."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--calls", type=int, default=2000, help="measured pairs (after 20 warm-up pairs)")
        parser.add_argument(
            "--embedder-url",
            default="",
            help="a running `manage.py loopback_embedder` (e.g. http://127.0.0.1:8765/v1), as in the served case; "
            "default: one in this process, whose thread shares the client's GIL",
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        load_before = [round(x, 2) for x in os.getloadavg()]
        if options["embedder_url"]:
            figures = embed_overhead.measure(options["embedder_url"], calls=options["calls"])
            where = f"a separate process at {options['embedder_url']}"
        else:
            with loopback_embedder.running() as server:
                figures = embed_overhead.measure(server.url, calls=options["calls"])
            where = "this process (a thread)"
        summary = {**figures, "embedder": where, "load_average_before": load_before, "load_average_after": _load()}
        return summary, render(summary)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def render(summary: dict[str, Any]) -> str:
    lines = [
        f"{summary['calls']} pairs against a loopback embedder in {summary['embedder']}; load average before "
        f"{summary['load_average_before']}, after {summary['load_average_after']}; "
        f"connections opened {summary['connections_opened']} (2 = kept alive)",
        f"{'series':<36}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'mean':>8}",
    ]
    for label, key in (
        ("raw HTTP round trip", "raw_http_ms"),
        ("embed_texts (openai provider)", "embed_texts_ms"),
        ("overhead (embed_texts - raw)", "overhead_ms"),
    ):
        f = summary[key]
        lines.append(f"{label:<36}{f['p50']:>8.3f}{f['p95']:>8.3f}{f['p99']:>8.3f}{f['mean']:>8.3f}")
    goal = summary["goal_overhead_le_1ms"]
    lines.append("goal overhead <= 1 ms: " + ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in goal.items()))
    return "\n".join(lines)
