"""loadtest: the load benchmark (docs/reliability.md, "Load benchmark") against a service that is already running.

It creates one agent key per simulated agent in a benchmark tenant (so each agent is its own subject), runs locust
headless on `bench/load/locustfile.py` in a separate process (gevent stays out of this Django process), then prints
throughput, p50/p95/p99 per operation, errors by status (5xx apart), the lost-write check and the load average
before and after. It starts nothing: run `scripts/serve` first, with the same LOOPMEM_DATA_DIR (or DATABASE_URL),
since the lost-write check reads the database the service writes to.

Two scenarios (`bench/load/locustfile.py`): `mixed` (think time between calls) and `capacity` (the 70/20/10 mix of
recall, remember and session append, over subjects filled with `--memories` memories each beforehand), paced
`closed` (capacity: no pause) or `poisson` (an offered load of `--rate` requests a second per agent). `--users`
takes one level or several ("1,8,32"): each level runs with agents of its own, and a table of every level closes
the report.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import urllib.request
import uuid
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from bench import cpu_share
from bench.harness import bench_agent
from bench.load.texts import RECALL_MODES, TOPICS, fact
from bench.load_report import errors_by_status, lost_write_check, operation_table, render, server_errors
from loopmem.embedding.pipeline import backfill
from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey, Tenant
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import IssuedKey, api_key_create, api_key_revoke
from memory.embedding import MEMORY_EMBEDDINGS
from memory.services import memory_remember

REPOSITORY = Path(__file__).resolve().parents[3]
LOCUSTFILE = REPOSITORY / "bench" / "load" / "locustfile.py"
USER_CLASSES = {"mixed": "Agent", "capacity": "CapacityAgent"}


class Command(OperatorCommand):
    help = (
        "Load benchmark (locust, headless) against a running service: N agents remembering, recalling and appending "
        "session turns, at one or several levels; prints figures and checks no acknowledged write was lost."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default=f"http://{settings.SERVE_HOST}:{settings.SERVE_PORT}")
        parser.add_argument(
            "--users", default="50", help="concurrent agents, each with its own key; several levels: 1,8,32"
        )
        parser.add_argument("--run-time", type=int, default=60, metavar="SECONDS", help="per level")
        parser.add_argument("--scenario", choices=sorted(USER_CLASSES), default="mixed")
        parser.add_argument("--think", default="0,1", metavar="MIN,MAX", help="mixed: seconds between an agent's calls")
        parser.add_argument("--pace", choices=["closed", "poisson"], default="closed", help="capacity: pacing")
        parser.add_argument("--rate", type=float, default=1.0, help="capacity, poisson: requests a second per agent")
        parser.add_argument("--memories", type=int, default=40, help="capacity: memories in each agent's subject first")
        parser.add_argument("--tenant", default="bench-load", help="slug of the benchmark tenant (created once)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        levels = parse_levels(options["users"])
        if options["run_time"] < 1 or options["rate"] <= 0 or options["memories"] < 0:
            raise CommandError("--run-time must be at least 1, --rate above 0, --memories at least 0")
        runs = [self._level(users, options) for users in levels]
        if len(runs) == 1:
            return runs[0]
        summaries = [summary for summary, _ in runs]
        human = "\n\n".join(text for _, text in runs) + "\n\n" + render_levels(summaries)
        return {"levels": summaries}, human

    def _level(self, users: int, options: dict[str, Any]) -> tuple[dict[str, Any], str]:
        run_id = uuid.uuid4().hex[:8]
        run_dir = settings.DATA_DIR / "loadtest" / run_id
        run_dir.mkdir(parents=True)
        tenant, keys = self._agents(options["tenant"], run_id, users)
        if options["scenario"] == "capacity":
            fill_subjects(tenant, keys, options["memories"])
            warm_up(options["host"], keys[0].raw_key)
        load_before = os.getloadavg()
        keys_file = run_dir / "keys.json"
        keys_file.touch(mode=0o600)
        keys_file.write_text(json.dumps([key.raw_key for key in keys]))
        results_file = run_dir / "results.json"
        try:
            cpu_before = cpu_share.snapshot()
            self._locust(users, options, keys_file, results_file, run_dir)
            cpu_spent = cpu_share.cpu_seconds(cpu_before, cpu_share.snapshot())
        finally:
            keys_file.unlink()
            for key in keys:  # the run's keys live only as long as the run
                api_key_revoke(key_id=str(key.api_key.id))
        if not results_file.exists():
            raise CommandError(f"locust wrote no results; see {run_dir / 'locust.log'}")
        results = json.loads(results_file.read_text())
        check = lost_write_check(tenant=tenant, acknowledged=results["acknowledged"])
        table = operation_table(results)
        by_status = errors_by_status(results)
        load_after = os.getloadavg()
        summary = {
            "host": options["host"],
            "users": users,
            "scenario": options["scenario"],
            "pacing": pacing(options),
            "seconds": round(results["seconds"], 1),
            "think_seconds": options["think"],
            "operations": table,
            "errors_by_status": by_status,
            "server_errors": server_errors(by_status),
            "acknowledged": sum(check.acknowledged.values()),
            "present": sum(check.present.values()),
            "lost": check.lost,
            # This machine's processes only: a service elsewhere shows as the load generator alone.
            "cpu_seconds": cpu_spent,
            "cpu_ms_per_request": cpu_share.per_request_ms(cpu_spent, table.get("all", {}).get("requests", 0)),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "run_dir": str(run_dir),
        }
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        header = (
            f"load: {users} agents for {results['seconds']:.0f} s, {options['scenario']} ({pacing(options)}) "
            f"against {options['host']}; run {run_id}, files in {run_dir}"
        )
        human = render(header=header, table=table, by_status=by_status, check=check, load_before=load_before,
                       load_after=load_after)  # fmt: skip
        human += "\n" + render_cpu(summary["cpu_seconds"], summary["cpu_ms_per_request"])
        return summary, human

    def _agents(self, slug: str, run_id: str, users: int) -> tuple[Tenant, list[IssuedKey]]:
        """The benchmark tenant (high rate limit: the limiter runs but never refuses) and one agent key each."""
        tenant, first = bench_agent(slug=slug, agent_id=f"load-{run_id}-1")
        rest = [
            api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=f"load-{run_id}-{n}", name="load benchmark")
            for n in range(2, users + 1)
        ]
        return tenant, [first, *rest]

    def _locust(self, users: int, options: dict[str, Any], keys_file: Path, results_file: Path, run_dir: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPOSITORY),  # the locustfile imports bench.load.texts, and nothing else of ours
            "LOOPMEM_LOAD_KEYS": str(keys_file),
            "LOOPMEM_LOAD_RESULTS": str(results_file),
            "LOOPMEM_LOAD_WAIT": options["think"],
            "LOOPMEM_LOAD_PACE": options["pace"],
            "LOOPMEM_LOAD_RATE": str(options["rate"]),
        }
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
            "--host", options["host"],
            "--users", str(users), "--spawn-rate", str(users),  # every agent within a second
            "--run-time", f"{options['run_time']}s",
            "--stop-timeout", "10",  # in-flight requests finish: their answers count
            "--only-summary", "--exit-code-on-error", "0",
            "--logfile", str(run_dir / "locust.log"),
            USER_CLASSES[options["scenario"]],
        ]  # fmt: skip
        with (run_dir / "locust.out").open("wb") as out:
            finished = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        if finished.returncode != 0:
            raise CommandError(f"locust exited {finished.returncode}; see {run_dir / 'locust.out'}")


def parse_levels(value: str) -> list[int]:
    """The agent counts to run, in order: one level ("50") or several ("1,8,32")."""
    try:
        levels = [int(part) for part in value.split(",")]
    except ValueError:
        raise CommandError(f"--users takes agent counts separated by commas, not {value!r}") from None
    if not levels or min(levels) < 1:
        raise CommandError("--users: every level needs at least 1 agent")
    return levels


def pacing(options: dict[str, Any]) -> str:
    """How the run's agents send their requests, in words."""
    if options["scenario"] == "mixed":
        return f"think {options['think']} s"
    if options["pace"] == "poisson":
        return f"poisson, {options['rate']:g} req/s per agent"
    return "closed loop"


def fill_subjects(tenant: Tenant, keys: list[IssuedKey], memories: int) -> None:
    """`memories` memories in each agent's subject, embedded before the run starts (the embedding is done here, as
    the worker would, so that the run measures recall over embedded memories and not the worker's backlog)."""
    if memories == 0:
        return
    with progress_bar(total=len(keys) * memories, desc="fill subjects") as bar:
        for key in keys:
            scope = Scope(tenant_id=tenant.id, subject_id=key.api_key.agent_id)
            for _ in range(memories):
                memory_remember(scope=scope, text=fact(), tags=["load-fill"])
            bar.update(memories)
    stale = MEMORY_EMBEDDINGS.stale(tenant).count()  # the worker may have embedded some already
    with progress_bar(total=stale, desc="embed") as bar:
        backfill(MEMORY_EMBEDDINGS, tenant=tenant, limit=stale, on_batch=bar.update)


# Each web process loads the embedding model on its first query and compiles its prepared reads on its first recall
# of each shape: a few sequential recalls per mode reach every process of a small pool before the clock starts.
WARM_UP_RECALLS = 8


def warm_up(host: str, raw_key: str) -> None:
    """Untimed recalls in every mode, so that a level measures warm processes (its first seconds are not a restart)."""
    headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}
    for mode in RECALL_MODES:
        for _ in range(WARM_UP_RECALLS):
            body = json.dumps({"query": f"what about the {random.choice(TOPICS)} timeout", "mode": mode}).encode()
            request = urllib.request.Request(f"{host}/api/v1/memory/recall", data=body, headers=headers)
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()


def render_cpu(spent: dict[str, float], per_request: dict[str, float]) -> str:
    """CPU seconds per kind of process on this machine over the run, and per answered request."""
    if not per_request:
        return "cpu: no request answered"
    parts = [f"{kind} {seconds:.1f} s ({per_request[kind]:.2f} ms)" for kind, seconds in spent.items()]
    return f"cpu over the run (per request): {', '.join(parts)}; all {per_request['all']:.2f} ms a request"


def render_levels(summaries: list[dict[str, Any]]) -> str:
    """One line per level: the whole mix's throughput and latency, errors and lost writes, the load after."""
    lines = [
        f"{'agents':>6}  {'pacing':<28}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'errors':>8}{'lost':>6}"
        f"{'cpu ms/req':>12}  load after"
    ]
    for summary in summaries:
        every = summary["operations"].get("all", {})
        figures = [every.get(column, "-") for column in ("per_second", "p50_ms", "p95_ms", "p99_ms")]
        lines.append(
            f"{summary['users']:>6}  {summary['pacing']:<28}{figures[0]:>8}{figures[1]:>9}{figures[2]:>9}"
            f"{figures[3]:>9}{every.get('errors', 0):>8}{summary['lost']:>6}"
            f"{summary['cpu_ms_per_request'].get('all', '-'):>12}  {summary['load_average_after'][0]:.2f}"
        )
    return "\n".join(lines)
