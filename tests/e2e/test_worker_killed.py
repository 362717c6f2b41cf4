"""A worker killed mid-task loses no task: acks late + a visibility timeout hand it to the next worker.

Also end to end on that worker: its own metrics exporter (multiprocess mode) counts the task, and its JSON log
lines carry the request id of the API call that enqueued the task.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from config.celery import app as celery_app
from loopmem.services import tenant_set_provider
from memory.models import Memory
from tests.e2e.test_worker import _test_database_url, _wait_for
from tests.memory.conftest import heavy_db

ROOT = Path(__file__).resolve().parents[2]


class EmbeddingsServer(ThreadingHTTPServer):
    """An OpenAI-compatible /embeddings endpoint whose first call hangs (the task is mid-flight) until released."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EmbeddingsHandler)
        self.calls = 0
        self.first_call = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    server: EmbeddingsServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        self.server.calls += 1
        if self.server.calls == 1:
            self.server.first_call.set()
            self.server.release.wait(timeout=6)  # under the client's 8 s timeout: the kill comes first
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": [1.0] + [0.0] * 383} for i in range(len(texts))]
        payload = json.dumps({"object": "list", "data": data, "model": body.get("model", "m"),
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the worker that asked may have been killed
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def embeddings_server() -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_worker(**env: str) -> subprocess.Popen[bytes]:
    full_env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--queues", "embedding",
         "--without-mingle", "--without-gossip", "--loglevel", "INFO"],
        cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        process.terminate()
    try:
        output = process.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0]
    return output.decode(errors="replace")


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@heavy_db
def test_a_task_of_a_killed_worker_runs_on_the_next_one(agent, tenant, embeddings_server, tmp_path):
    celery_app.control.purge()
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=embeddings_server.url, embedding_api_key="sk-t",
        embedding_model="m",
    )  # fmt: skip
    first = start_worker()
    try:
        created = agent.post("/api/v1/memory", {"text": "survives a kill"}, format="json", HTTP_X_REQUEST_ID="req-kill")
        memory_id = created.json()["data"]["id"]
        if not embeddings_server.first_call.wait(timeout=45):
            pytest.fail(f"the first worker never took the task:\n{stop(first)}")
        first.send_signal(signal.SIGKILL)  # mid-task: the provider call has not answered yet
        first.wait(timeout=10)
    finally:
        stop(first)
    embeddings_server.release.set()
    assert not Memory.objects.filter(id=memory_id, embedding__isnull=False).exists()

    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    stale = metrics_dir / "counter_999999.db"  # a previous run's values: the worker must not sum them
    stale.write_bytes(b"stale")
    port = _free_port()
    second = start_worker(
        LOOPMEM_CELERY_VISIBILITY_TIMEOUT_SECONDS="2",
        LOOPMEM_CELERY_UNACKED_RESTORE_INTERVAL_SECONDS="1",
        LOOPMEM_CELERY_UNACKED_RESTORE_THROTTLE="1",
        LOOPMEM_LOG_FORMAT="json",
        LOOPMEM_WORKER_METRICS_PORT=str(port),
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
    )
    try:
        embedded = _wait_for(lambda: Memory.objects.filter(id=memory_id, embedding__isnull=False).exists(), 60)
        if not embedded:
            pytest.fail(f"the task was lost with the killed worker; the next worker said:\n{stop(second)}")
        assert embeddings_server.calls == 2  # asked once by each worker
        task = frozenset({("task", "memory.tasks.embed_memory_task"), ("state", "success")})
        # The row is stored inside the task; the count follows when the task returns (task_postrun).
        assert _wait_for(lambda: ("loopmem_celery_tasks_total", task) in scrape(port), 20)
        samples = scrape(port)
        assert samples[("loopmem_celery_tasks_total", task)] == 1
        assert not stale.exists()
        ok = frozenset({("provider", "openai"), ("outcome", "ok")})
        assert samples[("loopmem_embedding_seconds_count", ok)] == 1
    finally:
        output = stop(second)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    succeeded = [line for line in lines if "succeeded" in str(line["message"])]
    assert succeeded, output
    assert {line["request_id"] for line in succeeded} == {"req-kill"}
    celery_app.control.purge()
