"""gunicorn with several workers in multiprocess mode: /metrics sums what every worker counted."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_worker import _test_database_url, _wait_for
from tests.e2e.test_worker_killed import _free_port, stop

ROOT = Path(__file__).resolve().parents[2]


def get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


@pytest.mark.django_db
def test_every_gunicorn_worker_is_counted(tmp_path):
    port = _free_port()
    metrics_dir = tmp_path / "web"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999999.db").write_bytes(b"stale")  # a previous run's file: on_starting removes it
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "LOOPMEM_METRICS_TOKEN": "scrape-me",
    }
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
         "--bind", f"127.0.0.1:{port}", "--workers", "3"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        if not _wait_for(lambda: get(f"{base}/healthz")[0] == 200, 60):
            pytest.fail(f"gunicorn did not come up:\n{stop(web)}")
        # Counted from a first scrape, not from zero: a start-up probe the client gave up on (a busy machine) may
        # still have been answered, and counted, by a worker.
        before = _samples(get(f"{base}/metrics", Authorization="Bearer scrape-me")[1])
        for _ in range(29):
            assert get(f"{base}/healthz")[0] == 200
        assert get(f"{base}/metrics")[0] == 404
        status, text = get(f"{base}/metrics", Authorization="Bearer scrape-me")
        assert status == 200
    finally:
        stop(web)
    samples = _samples(text)
    healthz = ("loopmem_http_requests_total", frozenset({("route", "healthz"), ("method", "GET"), ("status", "200")}))
    assert samples[healthz] - before[healthz] == 29
    assert ("loopmem_celery_queue_depth", frozenset({("queue", "embedding")})) in samples
    pids = {path.name for path in metrics_dir.glob("counter_*.db")}
    assert "counter_999999.db" not in pids


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
