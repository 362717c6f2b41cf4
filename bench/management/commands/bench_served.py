"""bench_served: drive a running `scripts/serve` over real HTTP, side by side with the SQL and the in-process read."""

from __future__ import annotations

import os
import platform
import uuid
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.db import connection

from bench import scale_corpus, served
from bench.management.commands import bench_merged_recall
from bench.management.commands.seed_scale import corpus_progress
from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import IssuedKey


class Command(OperatorCommand):
    help = (
        "Measure a RUNNING service (scripts/serve; this command starts nothing) over real HTTP with concurrent "
        "kept-alive clients, beside the bare scoped SQL and in-process recall_by_vector, on one tenant of this "
        "database (built once, or --reuse) whose openai provider points at a running `manage.py loopback_embedder`. "
        "Set LOOPMEM_METRICS_TOKEN for both the service and this command to get the query-cache hit rate."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the running service")
        parser.add_argument(
            "--compare-url",
            help="a second running service on the same database (e.g. the previous commit): every HTTP request goes "
            "to both, interleaved, and each series is printed for both (goals are judged on --base-url)",
        )
        parser.add_argument("--embedder-url", default="http://127.0.0.1:8765/v1", help="the loopback embedder")
        parser.add_argument("--rows", type=int, default=200_000, help="memories")
        parser.add_argument("--subjects", type=int, default=2_000)
        parser.add_argument("--articles", type=int, default=20_000)
        parser.add_argument("--queries", type=int, default=200, help="sampled subjects, one query each")
        parser.add_argument("--repeats", type=int, default=1, help="times each query is asked per series")
        parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients (threads)")
        parser.add_argument("--writes", type=int, default=400, help="remember and session-append requests each")
        parser.add_argument(
            "--embed-wait",
            type=float,
            default=30.0,
            help="seconds to wait, after the remember series, for the service's worker to embed every write",
        )
        parser.add_argument("--tenant-slug", help="default: bench-served-<rows>-<subjects>-<articles>")
        parser.add_argument("--reuse", action="store_true", help="measure the corpus the tenant already holds")
        parser.add_argument("--seed", type=int, default=scale_corpus.DEFAULT_SEED)
        parser.add_argument("--metrics-token", default=settings.METRICS_TOKEN, help="default LOOPMEM_METRICS_TOKEN")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        rows, subjects, articles = options["rows"], options["subjects"], options["articles"]
        slug = options["tenant_slug"] or f"bench-served-{rows}-{subjects}-{articles}"
        load_start = served.load_average()
        with corpus_progress(rows) as progress:
            tenant, corpus, built = served.prepare(
                slug=slug,
                rows=rows,
                subjects=subjects,
                articles=articles,
                reuse=options["reuse"],
                seed=options["seed"],
                embedder_url=options["embedder_url"],
                build_articles=bench_merged_recall.build_articles,
                progress=progress.rows,
                phase=progress.phase,
            )
        plan = served.Plan(
            base_url=options["base_url"].rstrip("/"),
            compare_url=options["compare_url"].rstrip("/") if options["compare_url"] else None,
            clients=options["clients"],
            repeats=options["repeats"],
            writes=options["writes"],
            metrics_token=options["metrics_token"],
            run_id=uuid.uuid4().hex[:8],
            embed_wait_seconds=options["embed_wait"],
        )
        keys: list[IssuedKey] = []
        try:
            probes = served.make_probes(tenant, corpus, count=options["queries"], seed=options["seed"])
            keys += [p.key for p in probes]
            writers = served.writer_keys(tenant, run_id=plan.run_id, count=options["clients"])
            keys += writers
            figures = served.measure(tenant, probes, writers, plan)
            embedding_lag = figures.pop("embedding_lag")
        finally:
            served.clean_up(tenant, keys)
        summary: dict[str, Any] = {
            "corpus": {
                "tenant": tenant.slug,
                "memories": rows,
                "subjects": subjects,
                "articles": articles,
                "model_id": served.MODEL_ID,
                "dimensions": corpus.load.dimensions,
                "built_now": built,
            },
            "environment": _environment(),
            "plan": {
                "base_url": plan.base_url,
                "compare_url": plan.compare_url,
                "embedder_url": options["embedder_url"],
                "queries": len(probes),
                "repeats": plan.repeats,
                "clients": plan.clients,
                "writes": plan.writes,
            },
            "load_average_at_start": load_start,
            "load_average_at_end": served.load_average(),
            "series": figures,
            "embedding_lag": embedding_lag,
            "goals": served.goals(figures),
        }
        return summary, render(summary)


def _environment() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), (SELECT extversion FROM pg_extension WHERE extname = 'vector'),"
            " current_setting('shared_buffers')"
        )
        row = cursor.fetchone()
    assert row is not None
    return {
        "postgres": row[0],
        "pgvector": row[1],
        "shared_buffers": row[2],
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


LABELS = (
    ("bare_sql", "bare scoped SQL (psycopg, 1 thread)"),
    ("recall_by_vector", "recall_by_vector (in-process, 1 thread)"),
    ("http_memory_recall_semantic", "HTTP /memory/recall semantic"),
    ("http_memory_recall_hybrid", "HTTP /memory/recall hybrid"),
    ("http_recall", "HTTP /recall (merged)"),
    ("http_remember", "HTTP remember (POST /memory)"),
    ("http_session_append", "HTTP session append"),
)


def render(summary: dict[str, Any]) -> str:
    corpus, env, plan = summary["corpus"], summary["environment"], summary["plan"]
    lines = [
        f"tenant {corpus['tenant']}: {corpus['memories']:,} memories over {corpus['subjects']:,} subjects, "
        f"{corpus['articles']:,} articles, model {corpus['model_id']}, {corpus['dimensions']} dims "
        f"({'built now' if corpus['built_now'] else 'reused'})",
        f"PostgreSQL {env['postgres']}, pgvector {env['pgvector']}, shared_buffers {env['shared_buffers']}, "
        f"{env['cpus']} CPUs; service {plan['base_url']}, embedder {plan['embedder_url']}; {plan['queries']} queries "
        f"x {plan['repeats']}, {plan['clients']} HTTP clients, {plan['writes']} writes",
        f"load average at start {summary['load_average_at_start']}, at end {summary['load_average_at_end']}",
        "",
        f"{'series':<42}{'p50':>8}{'p95':>8}{'p99':>8}{'req/s':>8}{'err':>5}{'R@10':>7}{'cache hit':>10}"
        f"  load before -> after",
    ]
    for key, label in LABELS:
        lines += _row(label, summary["series"][key])
        compared = summary["series"].get(f"{key}{served.COMPARED}")
        if compared is not None:
            lines += _row(f"  the same at {plan['compare_url']}", compared)
    if plan["compare_url"]:
        lines += [
            "",
            f"HTTP series interleaved request by request between {plan['base_url']} and {plan['compare_url']}",
        ]
    lines += ["", _embedding_lag_line(summary["embedding_lag"])]
    verdicts = ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in summary["goals"].items())
    lines += ["", f"latencies in ms; goals: {verdicts}"]
    if not any(summary["series"][k]["query_cache"] for k, _ in LABELS):
        lines.append("query-cache hit rate: set LOOPMEM_METRICS_TOKEN for the service and this command")
    return "\n".join(lines)


def _embedding_lag_line(lag: dict[str, Any]) -> str:
    if lag["seconds_after_last_write"] is not None:
        return (
            f"remember: all {lag['rows']} written memories held their vector "
            f"{lag['seconds_after_last_write']:.2f} s after the last write was answered"
        )
    return (
        f"remember: {lag['embedded']} of {lag['rows']} written memories held their vector after "
        f"{lag['waited_seconds']:.1f} s (--embed-wait reached: is the service's embedding worker running?)"
    )


def _row(label: str, s: dict[str, Any]) -> list[str]:
    latency = s["latency_ms"] or {"p50": float("nan"), "p95": float("nan"), "p99": float("nan")}
    recall = f"{s['recall_at_10']:.3f}" if s["recall_at_10"] is not None else "-"
    cache = (
        f"{s['query_cache']['hit_rate']:.1%}" if s["query_cache"] and s["query_cache"]["hit_rate"] is not None else "-"
    )
    lines = [
        f"{label:<42}{latency['p50']:>8.2f}{latency['p95']:>8.2f}{latency['p99']:>8.2f}"
        f"{s['throughput_per_s'] or 0:>8.1f}{s['errors']:>5}{recall:>7}{cache:>10}"
        f"  {s['load_average_before']} -> {s['load_average_after']}"
    ]
    if s["error_sample"]:
        lines.append(f"    first error: {s['error_sample']}")
    return lines
