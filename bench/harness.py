"""What the benchmark commands share: percentiles, a real gunicorn on loopback, a bench tenant and key."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from django.conf import settings

from loopmem.models import ApiKey, Tenant
from loopmem.tenancy.services import IssuedKey, api_key_create, api_key_revoke

BENCH_RATE_LIMIT = 10_000_000  # the limiter still runs (its cost is part of the figure) but never refuses


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 and mean of latencies in milliseconds, rounded to 0.01 ms."""
    values = np.asarray(samples_ms, dtype=np.float64)
    return {
        "p50": round(float(np.percentile(values, 50)), 2),
        "p95": round(float(np.percentile(values, 95)), 2),
        "p99": round(float(np.percentile(values, 99)), 2),
        "mean": round(float(values.mean()), 2),
        "n": len(values),
    }


def bench_agent(*, slug: str, agent_id: str = "bench-agent") -> tuple[Tenant, IssuedKey]:
    """A tenant for benchmarks (created once, high rate limit) and a fresh agent key for this run."""
    tenant, _ = Tenant.objects.get_or_create(
        slug=slug, defaults={"name": f"Benchmark {slug}", "rate_limit_requests_per_minute": BENCH_RATE_LIMIT}
    )
    for old in ApiKey.objects.filter(tenant=tenant, agent_id=agent_id, revoked_at__isnull=True):
        api_key_revoke(key_id=str(old.id))
    return tenant, api_key_create(role=ApiKey.Role.AGENT, tenant=tenant, agent_id=agent_id, name="benchmark")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def live_server(*, workers: int = 2) -> Iterator[str]:
    """gunicorn serving this project on a free loopback port, on this process's database and Redis."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": settings.DATABASE_URL,
        "HEAVY_READ_DATABASE_URL": settings.HEAVY_READ_DATABASE_URL,
        "REDIS_URL": settings.REDIS_URL,
        "LOOPMEM_SECRET_KEY": settings.SECRET_KEY,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--log-level", "warning"],
        cwd=Path(settings.BASE_DIR), env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the benchmark web server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
