"""bench_session: session-append latency (server side) and throughput with concurrent HTTP clients."""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from argparse import ArgumentParser
from typing import Any
from urllib.parse import urlsplit

from django.test import Client

from bench.harness import bench_agent, live_server, percentiles
from loopmem.management.operator import OperatorCommand
from loopmem.runtime.progress import progress_bar
from memory.models import SessionTurn

CONTENT = "The user asked to retry the deploy after the flaky integration test; agreed to pin the runner image."


class Command(OperatorCommand):
    help = (
        "Measure POST /api/v1/memory (tier session): server-side latency in-process (full Django stack, no "
        "network) and appends/s with concurrent HTTP clients against a real gunicorn on loopback."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--appends", type=int, default=2000, help="in-process appends for the latency figure")
        parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
        parser.add_argument("--per-client", type=int, default=500, help="appends per HTTP client")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--keep", action="store_true", help="keep the benchmark's turns")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant, key = bench_agent(slug="bench-session")
        run_id = uuid.uuid4().hex[:8]
        try:
            server_side = self._in_process(key.raw_key, options["appends"], run_id)
            concurrent = self._concurrent(
                key.raw_key, options["clients"], options["per_client"], options["web_workers"], run_id
            )
        finally:
            if not options["keep"]:
                SessionTurn.objects.filter(tenant=tenant, session_id__startswith=f"bench-{run_id}").delete()
        summary = {"server_side_ms": server_side, "concurrent": concurrent}
        human = "\n".join(
            [
                f"server side, in-process ({server_side['n']} appends): p50 {server_side['p50']} ms, "
                f"p95 {server_side['p95']} ms, p99 {server_side['p99']} ms",
                f"{concurrent['clients']} concurrent HTTP clients, {concurrent['web_workers']} gunicorn workers: "
                f"{concurrent['appends_per_second']} appends/s; per request p50 {concurrent['latency_ms']['p50']} ms, "
                f"p95 {concurrent['latency_ms']['p95']} ms ({concurrent['errors']} errors)",
            ]
        )
        return summary, human

    def _in_process(self, raw_key: str, count: int, run_id: str) -> dict[str, float]:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        samples: list[float] = []
        with progress_bar(total=count, desc="in-process appends") as bar:
            for n in range(count):
                body = {"tier": "session", "session_id": f"bench-{run_id}-{n % 50}", "role": "user", "content": CONTENT}
                started = time.perf_counter()
                response = client.post("/api/v1/memory", body, content_type="application/json")
                samples.append((time.perf_counter() - started) * 1000)
                if response.status_code != 201:
                    raise RuntimeError(f"append failed: {response.status_code} {response.content[:200]!r}")
                bar.update(1)
        return percentiles(samples[min(50, count // 10) :])  # drop warm-up (connections, caches)

    def _concurrent(self, raw_key: str, clients: int, per_client: int, workers: int, run_id: str) -> dict[str, Any]:
        samples: list[float] = []
        errors = 0
        lock = threading.Lock()
        with live_server(workers=workers) as url:
            target = urlsplit(url)

            def client_loop(n: int) -> None:
                nonlocal errors
                conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
                headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}
                own: list[float] = []
                failed = 0
                for m in range(per_client):
                    body = json.dumps(
                        {"tier": "session", "session_id": f"bench-{run_id}-c{n}", "role": "user", "content": CONTENT}
                    )
                    started = time.perf_counter()
                    conn.request("POST", "/api/v1/memory", body=body, headers=headers)
                    response = conn.getresponse()
                    response.read()
                    own.append((time.perf_counter() - started) * 1000)
                    failed += response.status != 201
                    if m == 0:
                        own.clear()  # the first request pays the connection set-up
                conn.close()
                with lock:
                    samples.extend(own)
                    errors += failed

            threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(clients)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
        return {
            "clients": clients,
            "web_workers": workers,
            "appends": clients * per_client,
            "seconds": round(elapsed, 2),
            "appends_per_second": round(clients * per_client / elapsed, 1),
            "latency_ms": percentiles(samples),
            "errors": errors,
        }
