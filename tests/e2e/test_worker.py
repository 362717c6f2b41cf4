"""End to end with a real Celery worker: remember over HTTP → broker → worker embeds → recall finds it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from config.celery import app as celery_app
from memory.models import Memory
from tests.memory.conftest import heavy_db

ROOT = Path(__file__).resolve().parents[2]


def _test_database_url() -> str:
    db = connections["default"].settings_dict
    host = db["HOST"] or db["OPTIONS"].get("host", "")
    return f"postgresql://{db['USER']}:{db['PASSWORD'] or ''}@/{db['NAME']}?host={host}&port={db['PORT'] or 5432}"


@pytest.fixture
def worker() -> Iterator[subprocess.Popen[bytes]]:
    celery_app.control.purge()  # earlier tests' enqueues point at rows that no longer exist
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
         "--without-mingle", "--without-gossip", "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_for(predicate, timeout: float = 45.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@heavy_db
def test_a_real_worker_embeds_what_the_api_remembered(worker, client_for, agent_key):
    client = client_for(agent_key)
    created = client.post("/api/v1/memory", {"text": "the deploy key rotates every friday"}, format="json")
    assert created.status_code == 201
    memory_id = created.json()["data"]["id"]
    embedded = _wait_for(lambda: Memory.objects.filter(id=memory_id, embedding__isnull=False).exists())
    if not embedded:
        worker.terminate()
        output = worker.communicate(timeout=15)[0].decode(errors="replace")
        pytest.fail(f"the worker did not embed the memory; its output:\n{output}")
    body = client.post("/api/v1/memory/recall", {"query": "when does the deploy key rotate"}, format="json").json()
    assert [hit["memory"]["id"] for hit in body["data"]] == [memory_id]
    assert body["meta"]["fallback"] is False
