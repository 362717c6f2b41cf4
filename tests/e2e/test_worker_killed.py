"""Fault drills: a worker killed mid-task loses nothing (acks late + a visibility timeout hand its message to the
next worker), whether it was draining one memory, a batch of them, or persisting a promotion job.

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
import zlib
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from config.celery import app as celery_app
from loopmem.embedding.embedders import content_hash
from loopmem.tenancy.services import tenant_set_provider
from memory.models import Memory, PromotionJob
from memory.promotion import jobs as promotion
from tests.e2e.test_worker import _test_database_url, _wait_for
from tests.memory.conftest import heavy_db

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.faults


class EmbeddingsServer(ThreadingHTTPServer):
    """An OpenAI-compatible /embeddings endpoint whose `hang_on_call`-th call hangs (the task is mid-flight) until
    released. Each text gets its own one-hot vector (`axis_of`), so a row holding another text's vector shows."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EmbeddingsHandler)
        self.calls = 0
        self.hang_on_call = 1
        self.texts: list[str] = []  # every text asked for, in order, the hung call's included
        self.batches: list[list[str]] = []  # the texts of each call
        self.first_call = threading.Event()  # the hanging call has arrived
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @staticmethod
    def axis_of(text: str) -> int:
        return zlib.crc32(text.encode()) % DIMENSIONS

    @contextlib.contextmanager
    def running(self) -> Iterator[EmbeddingsServer]:
        """Serve from a thread until the block ends; a call still hanging is released first."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        try:
            yield self
        finally:
            self.release.set()
            self.shutdown()
            self.server_close()


DIMENSIONS = 384


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    server: EmbeddingsServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.server.calls += 1
        self.server.texts.extend(texts)
        self.server.batches.append(texts)
        if self.server.calls == self.server.hang_on_call:
            self.server.first_call.set()
            self.server.release.wait(timeout=6)  # under the client's 8 s timeout: the kill comes first
        data = [
            {"object": "embedding", "index": i, "embedding": _one_hot(self.server.axis_of(text))}
            for i, text in enumerate(texts)
        ]
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
    with EmbeddingsServer().running() as server:
        yield server


def _one_hot(axis: int) -> list[float]:
    vector = [0.0] * DIMENSIONS
    vector[axis] = 1.0
    return vector


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_worker(queues: str = "embedding", **env: str) -> subprocess.Popen[bytes]:
    full_env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--queues", queues,
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
        task = frozenset({("task", "memory.tasks.embed_pending_memories_task"), ("state", "success")})
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


# The next worker hands a dead worker's unacknowledged messages back to the queue within seconds, not the hour.
RESTORES_QUICKLY = {
    "LOOPMEM_CELERY_VISIBILITY_TIMEOUT_SECONDS": "2",
    "LOOPMEM_CELERY_UNACKED_RESTORE_INTERVAL_SECONDS": "1",
    "LOOPMEM_CELERY_UNACKED_RESTORE_THROTTLE": "1",
}
BATCH = [
    "The build cache lives on the shared volume.",
    "Deploys pause during the Friday freeze.",
    "The payments sandbox resets every night.",
    "Feature flags are read from the config service.",
    "Load tests run against the staging cluster only.",
    "Log retention on the edge nodes is seven days.",
]


def kill_when_hung(worker: subprocess.Popen[bytes], server: EmbeddingsServer) -> None:
    """SIGKILL the worker while its provider call hangs: the task is mid-flight, its message unacknowledged."""
    try:
        if not server.first_call.wait(timeout=45):
            pytest.fail(f"the worker never reached the hanging call:\n{stop(worker)}")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        stop(worker)
        server.release.set()


@heavy_db
def test_a_batch_whose_worker_dies_mid_embedding_is_embedded_once_each_by_the_next(agent, tenant, embeddings_server):
    assert len({EmbeddingsServer.axis_of(text) for text in BATCH}) == len(BATCH)  # one vector per text
    celery_app.control.purge()
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=embeddings_server.url, embedding_api_key="sk-t",
        embedding_model="m",
    )  # fmt: skip
    first = start_worker()
    answer = agent.post("/api/v1/memory/batch", {"memories": [{"text": text} for text in BATCH]}, format="json")
    assert answer.json()["meta"] == {"created": len(BATCH), "failed": 0}
    ids = [item["memory"]["id"] for item in answer.json()["data"]]
    kill_when_hung(first, embeddings_server)  # the drain's first provider call hangs: its claim is in flight
    [claimed] = embeddings_server.batches
    assert not Memory.objects.filter(id__in=ids, embedding__isnull=False).exists()

    second = start_worker(**RESTORES_QUICKLY)
    try:
        every_row = _wait_for(lambda: Memory.objects.filter(id__in=ids, embedding__isnull=False).count() == 6, 60)
        if not every_row:
            pytest.fail(f"a memory was never embedded; the next worker said:\n{stop(second)}")
    finally:
        stop(second)
    for memory in Memory.objects.filter(id__in=ids):
        # Each row holds its own text's vector, of the tenant's model, for its current text: none crossed.
        vector = list(memory.embedding)
        assert vector.index(max(vector)) == EmbeddingsServer.axis_of(memory.text)
        assert (memory.embedding_model, memory.embedding_content_hash) == ("openai:m", content_hash(memory.text))
    # The redelivered drain finished the dead one's claim (asked again), then embedded the rest once each; within
    # the drill's minute, so not by the sweep.
    assert Counter(embeddings_server.texts) == {text: 2 if text in claimed else 1 for text in BATCH}
    celery_app.control.purge()


FACT_TURNS = [
    "The integration tests need DOCKER_HOST set to the remote daemon.",
    "The staging database is restored from a snapshot every Monday at 04:00 UTC.",
    "Releases are tagged from the main branch only, never from a feature branch.",
]


@heavy_db
def test_a_promotion_whose_worker_dies_mid_persist_resumes_and_completes_once(agent, tenant, embeddings_server):
    celery_app.control.purge()
    tenant_set_provider(
        tenant=tenant, embedding="openai", embedding_base_url=embeddings_server.url, embedding_api_key="sk-t",
        embedding_model="m",
    )  # fmt: skip
    for content in FACT_TURNS:  # the offline compiler (no LLM key) keeps each of these facts
        turn = {"tier": "session", "session_id": "s-kill", "role": "fact", "content": content}
        assert agent.post("/api/v1/memory", turn, format="json").status_code == 201
    embeddings_server.hang_on_call = 2  # persist embeds each candidate: the first is written, the second hangs
    first = start_worker(queues="promotion")
    assert agent.post("/api/v1/memory/promote", {"session_id": "s-kill"}, format="json").status_code == 202
    try:
        if not embeddings_server.first_call.wait(timeout=45):
            pytest.fail(f"the worker never reached the hanging call:\n{stop(first)}")
        midway = agent.get("/api/v1/memory/promote/s-kill").json()["data"]
    finally:
        kill_when_hung(first, embeddings_server)
    # The status shows the run's progress: running, first attempt, one memory written and named.
    assert (midway["status"], midway["attempts"], midway["counts"]["written"]) == ("running", 1, 1)
    [written_before_the_kill] = midway["memory_ids"]

    second = start_worker(queues="promotion", **RESTORES_QUICKLY)
    try:
        finished = _wait_for(
            lambda: agent.get("/api/v1/memory/promote/s-kill").json()["data"]["status"] not in ("pending", "running"),
            60,
        )
        if not finished:
            pytest.fail(f"the job never finished; the next worker said:\n{stop(second)}")
    finally:
        stop(second)
    job = agent.get("/api/v1/memory/promote/s-kill").json()["data"]
    assert (job["status"], job["outcome"], job["attempts"]) == ("succeeded", "promoted", 2)
    promoted = Memory.objects.filter(tenant=tenant, source=Memory.Source.PROMOTED)
    # Exactly once: every fact one row, the dead run's row kept (not written again), the job naming all three.
    assert sorted(promoted.values_list("text", flat=True)) == sorted(FACT_TURNS)
    assert sorted(job["memory_ids"]) == sorted(str(memory_id) for memory_id in promoted.values_list("id", flat=True))
    assert written_before_the_kill in job["memory_ids"]
    asked = Counter(embeddings_server.texts)
    assert sorted(asked.values()) == [1, 1, 2]  # the hung text asked again; the written one deduplicated, not re-asked
    assert asked[Memory.objects.get(id=written_before_the_kill).text] == 1
    # A late duplicate of the message finds the job finished and does nothing.
    assert promotion.promotion_run(job_id=str(PromotionJob.objects.get(session_id="s-kill").id)).outcome == "gone"
    celery_app.control.purge()
