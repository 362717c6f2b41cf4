"""bench_served drives a real gunicorn over HTTP on a tiny corpus: every series answers, reads are complete against
the exact top 10, the query cache is read from /metrics, and the run leaves no keys or written rows behind."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from bench import loopback_embedder
from bench.served import WRITER_PREFIX
from loopmem.models import ApiKey
from memory.models import Memory, SessionTurn
from tests.e2e.test_worker import _test_database_url, _wait_for
from tests.e2e.test_worker_killed import _free_port, stop

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "heavy_read"],
    available_apps=["loopmem", "projects", "memory", "knowledge", "bench"],
)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "served-bench"


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture
def service(tmp_path) -> Iterator[str]:
    """gunicorn with the project's config file (one worker, two threads) on the test database."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "LOOPMEM_METRICS_TOKEN": TOKEN,
        "LOOPMEM_WEB_WORKERS": "1",
        "LOOPMEM_WEB_THREADS": "2",
    }
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
         "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        if not _wait_for(lambda: _up(url), 60):
            pytest.fail(f"gunicorn did not come up:\n{stop(web)}")
        yield url
    finally:
        stop(web)


def test_every_series_answers_completely_and_the_run_cleans_up(service):
    out = io.StringIO()
    with loopback_embedder.running() as embedder:
        call_command(
            "bench_served", "--base-url", service, "--embedder-url", embedder.url, "--rows", "1200",
            "--subjects", "24", "--articles", "100", "--queries", "4", "--clients", "2", "--writes", "6",
            "--metrics-token", TOKEN, "--embed-wait", "0.2", "--json", stdout=out,
        )  # fmt: skip
    summary = json.loads(out.getvalue())
    # The service here is gunicorn alone, no embedding worker: the wait runs out and says how far it got.
    lag = summary["embedding_lag"]
    assert (lag["rows"], lag["embedded"], lag["seconds_after_last_write"]) == (6 + 2, 0, None)  # + a warm-up each
    assert lag["waited_seconds"] >= 0.2
    series = summary["series"]
    for name, figures in series.items():
        assert figures["errors"] == 0, (name, figures["error_sample"])
        assert figures["latency_ms"]["n"] > 0, name
    for name in ("bare_sql", "recall_by_vector", "http_memory_recall_semantic"):
        assert series[name]["recall_at_10"] == 1.0, name
    # The warm-up asked another text: each probe's query is embedded once, then served from the worker's cache.
    assert series["http_memory_recall_semantic"]["query_cache"] == {"hits": 0, "misses": 4, "hit_rate": 0.0}
    assert series["http_recall"]["query_cache"]["hits"] == 4
    assert series["http_recall"]["query_cache"]["misses"] == 0
    assert summary["corpus"]["built_now"] is True
    assert not Memory.objects.filter(subject_id__startswith=WRITER_PREFIX).exists()
    assert not SessionTurn.objects.filter(subject_id__startswith=WRITER_PREFIX).exists()
    assert not ApiKey.objects.filter(name="served benchmark", revoked_at__isnull=True).exists()


def test_a_compared_service_meets_every_request_interleaved(service):
    """--compare-url: each HTTP series measured at both URLs (here one service twice), request by request."""
    out = io.StringIO()
    with loopback_embedder.running() as embedder:
        call_command(
            "bench_served", "--base-url", service, "--compare-url", service, "--embedder-url", embedder.url,
            "--rows", "1200", "--subjects", "24", "--articles", "100", "--queries", "3", "--clients", "1",
            "--writes", "4", "--metrics-token", TOKEN, "--json", stdout=out,
        )  # fmt: skip
    series = json.loads(out.getvalue())["series"]
    http = [name for name in series if name.startswith("http_") and not name.endswith("@compare")]
    assert len(http) == 5
    for name in http:
        twin = series[f"{name}@compare"]
        assert twin["errors"] == 0, (name, twin["error_sample"])
        assert twin["latency_ms"]["n"] == series[name]["latency_ms"]["n"] > 0, name
    assert series["http_memory_recall_semantic@compare"]["recall_at_10"] == 1.0
    # The URLs are one service (one worker): each query misses once and hits once, and both URLs read its counters.
    for name in ("http_memory_recall_semantic", "http_memory_recall_semantic@compare"):
        assert series[name]["query_cache"] == {"hits": 3, "misses": 3, "hit_rate": 0.5}
    assert not Memory.objects.filter(subject_id__startswith=WRITER_PREFIX).exists()
