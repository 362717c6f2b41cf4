"""loadtest: the load benchmark (docs/reliability.md, "Load benchmark") against a service that is already running.

It creates one agent key per simulated agent in a benchmark tenant (so each agent is its own subject), runs locust
headless on `bench/load/locustfile.py` in a separate process (gevent stays out of this Django process), then prints
throughput, p50/p95/p99 per operation, errors by status (5xx apart), the lost-write check and the load average
before and after. It starts nothing: run `scripts/serve` first, with the same LOOPMEM_DATA_DIR (or DATABASE_URL),
since the lost-write check reads the database the service writes to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from bench.harness import bench_agent
from bench.load_report import errors_by_status, lost_write_check, operation_table, render, server_errors
from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey
from loopmem.tenancy.services import api_key_create, api_key_revoke

LOCUSTFILE = Path(__file__).resolve().parents[2] / "load" / "locustfile.py"


class Command(OperatorCommand):
    help = (
        "Load benchmark (locust, headless) against a running service: N agents remembering, recalling (hybrid, "
        "semantic), recalling merged and appending session turns; prints figures and checks no acknowledged write "
        "was lost."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default=f"http://{settings.SERVE_HOST}:{settings.SERVE_PORT}")
        parser.add_argument("--users", type=int, default=50, help="concurrent agents, each with its own key")
        parser.add_argument("--run-time", type=int, default=60, metavar="SECONDS")
        parser.add_argument("--think", default="0,1", metavar="MIN,MAX", help="seconds between an agent's calls")
        parser.add_argument("--tenant", default="bench-load", help="slug of the benchmark tenant (created once)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        users, seconds = options["users"], options["run_time"]
        if users < 1 or seconds < 1:
            raise CommandError("--users and --run-time must be at least 1")
        run_id = uuid.uuid4().hex[:8]
        run_dir = settings.DATA_DIR / "loadtest" / run_id
        run_dir.mkdir(parents=True)
        load_before = os.getloadavg()
        tenant, keys = self._agents(options["tenant"], run_id, users)
        keys_file = run_dir / "keys.json"
        keys_file.touch(mode=0o600)
        keys_file.write_text(json.dumps([key.raw_key for key in keys]))
        results_file = run_dir / "results.json"
        try:
            self._locust(options, keys_file, results_file, run_dir)
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
            "seconds": round(results["seconds"], 1),
            "think_seconds": options["think"],
            "operations": table,
            "errors_by_status": by_status,
            "server_errors": server_errors(by_status),
            "acknowledged": sum(check.acknowledged.values()),
            "present": sum(check.present.values()),
            "lost": check.lost,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "run_dir": str(run_dir),
        }
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        header = (
            f"load: {users} agents for {results['seconds']:.0f} s (think {options['think']} s) against "
            f"{options['host']}; run {run_id}, files in {run_dir}"
        )
        human = render(header=header, table=table, by_status=by_status, check=check, load_before=load_before,
                       load_after=load_after)  # fmt: skip
        return summary, human

    def _agents(self, slug: str, run_id: str, users: int) -> tuple[Any, list[Any]]:
        """The benchmark tenant (high rate limit: the limiter runs but never refuses) and one agent key each."""
        tenant, first = bench_agent(slug=slug, agent_id=f"load-{run_id}-1")
        rest = [
            api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=f"load-{run_id}-{n}", name="load benchmark")
            for n in range(2, users + 1)
        ]
        return tenant, [first, *rest]

    def _locust(self, options: dict[str, Any], keys_file: Path, results_file: Path, run_dir: Path) -> None:
        env = {
            **os.environ,
            "LOOPMEM_LOAD_KEYS": str(keys_file),
            "LOOPMEM_LOAD_RESULTS": str(results_file),
            "LOOPMEM_LOAD_WAIT": options["think"],
        }
        command = [
            sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
            "--host", options["host"],
            "--users", str(options["users"]), "--spawn-rate", str(options["users"]),  # every agent within a second
            "--run-time", f"{options['run_time']}s",
            "--stop-timeout", "10",  # in-flight requests finish: their answers count
            "--only-summary", "--exit-code-on-error", "0",
            "--logfile", str(run_dir / "locust.log"),
        ]  # fmt: skip
        with (run_dir / "locust.out").open("wb") as out:
            finished = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        if finished.returncode != 0:
            raise CommandError(f"locust exited {finished.returncode}; see {run_dir / 'locust.out'}")
