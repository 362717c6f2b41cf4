"""Drill: PostgreSQL stopped, restarted, and restarted under a running statement. The request in flight and the
requests made while it is down fail cleanly (503 `database_unavailable`, never a 500 or a hang); the next ones,
once it is back, succeed on a fresh connection (CONN_HEALTH_CHECKS).

The server is the drill's own: a copy of the test cluster (`pg_basebackup`, as tests/replica does, but started as
a primary) on its own socket, with both database aliases pointed at it for the test. The requests go through the
Django test client in-process: restarting the server under a whole `scripts/serve` stack would also restart
everything else this drill is not about.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connections

from memory import selectors
from memory.models import Memory
from tests.faults.conftest import timed
from tests.replica.conftest import _primary_server

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])]


@dataclass
class DrillPostgres:
    """A copy of the test cluster running on its own socket directory: stopped, started, restarted on demand."""

    bin_dir: Path
    data: Path
    socket_dir: Path
    port: int
    run_as: int | None

    def _ctl(self, *args: str) -> None:
        command: list[str | Path] = [self.bin_dir / "pg_ctl", *args, "-D", self.data, "-w", "-t", "60"]
        subprocess.run(command, check=True, capture_output=True, timeout=90, user=self.run_as)

    def start(self) -> None:
        self._ctl(
            "start", "-l", str(self.data.parent / "drill.log"), "-o", f"-h '' -k {self.socket_dir} -p {self.port}"
        )

    def stop(self) -> None:
        self._ctl("stop", "-m", "fast")  # fast: open sessions are terminated, as in a real restart


def _liveness_bound() -> float:
    # A hang check, not a performance assertion: a refused connection fails at once, a connect that is never
    # answered waits the connect timeout. Generous for a busy machine.
    return 3 * settings.DB_CONNECT_TIMEOUT_SECONDS + 2


@pytest.fixture
def drill_postgres(django_db_blocker: Any) -> Iterator[DrillPostgres]:
    db = connections["default"].settings_dict
    host = db["HOST"] or db["OPTIONS"].get("host", "")
    port = int(db["PORT"] or 5432)
    with (
        django_db_blocker.unblock(),
        psycopg.connect(f"host={host} port={port} dbname={db['NAME']} user={db['USER']}") as c,
    ):
        found = _primary_server(c)
    if found is None or not host.startswith("/"):
        pytest.skip("the PostgreSQL drill needs the embedded PostgreSQL (its data directory and binaries)")
    bin_dir, owner = found
    run_as = owner if os.getuid() != owner else None
    workdir = Path(tempfile.mkdtemp(prefix="loopmem-drill-pg-"))
    data, socket_dir = workdir / "data", workdir / "sock"
    socket_dir.mkdir()
    for path in (workdir, socket_dir):
        os.chown(path, owner, -1)
    subprocess.run(
        [bin_dir / "pg_basebackup", "-h", host, "-p", str(port), "-U", db["USER"], "-D", data,
         "-X", "stream", "-c", "fast"],
        check=True, capture_output=True, timeout=300, user=run_as,
    )  # fmt: skip
    (data / ".handle_pids.json").unlink(missing_ok=True)  # the copy is ours, not the embedded server's
    server = DrillPostgres(bin_dir, data, socket_dir, port, run_as)
    server.start()
    originals = {alias: connections[alias].settings_dict for alias in ("default", "heavy_read")}
    try:
        for alias, original in originals.items():
            connections[alias].close()
            connections[alias].settings_dict = {
                **original,
                "HOST": str(socket_dir),
                "OPTIONS": {**original.get("OPTIONS", {}), "host": str(socket_dir)},
            }
        yield server
    finally:
        for alias, original in originals.items():
            connections[alias].close()
            connections[alias].settings_dict = original
        subprocess.run(
            [bin_dir / "pg_ctl", "stop", "-D", data, "-m", "immediate"], capture_output=True, timeout=60, user=run_as
        )
        shutil.rmtree(workdir, ignore_errors=True)


class Served:
    """The agent's test client, with what the WSGI handler does around every request and the test client skips:
    `close_old_connections` at start and end (drop a connection that errored and is unusable; health-check the
    pooled one before its first use, CONN_HEALTH_CHECKS)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            close_old_connections()
            try:
                return getattr(self.client, method)(*args, **kwargs)
            finally:
                close_old_connections()

        return call


@pytest.fixture
def served(agent: Any) -> Served:
    return Served(agent)


def _remember(agent: Any, text: str) -> Any:
    return agent.post("/api/v1/memory", {"text": text}, format="json")


def _assert_unavailable(response: Any, seconds: float) -> None:
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "database_unavailable"
    assert seconds < _liveness_bound()


def test_requests_fail_cleanly_while_postgres_is_down_and_succeed_once_it_is_back(
    served: Served, drill_postgres: DrillPostgres
) -> None:
    agent = served
    first = _remember(agent, "before the restart")
    assert first.status_code == 201

    drill_postgres.stop()
    for call in (
        lambda: _remember(agent, "while it is down"),
        lambda: agent.get("/api/v1/memory"),
        lambda: agent.post("/api/v1/memory/recall", {"query": "restart"}, format="json"),
    ):
        _assert_unavailable(*timed(call))

    drill_postgres.start()
    after = _remember(agent, "after the restart")
    assert after.status_code == 201
    listed = agent.get("/api/v1/memory").json()["data"]
    assert {m["text"] for m in listed} == {"before the restart", "after the restart"}


def test_a_request_in_flight_during_a_restart_fails_cleanly_and_the_next_one_succeeds(
    served: Served, drill_postgres: DrillPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = served
    assert _remember(agent, "kept").status_code == 201
    running = threading.Event()
    list_memories = selectors.memory_list

    def slow_list(**kwargs: Any) -> Any:
        with connections["default"].cursor() as cursor:
            running.set()
            cursor.execute("SELECT pg_sleep(30)")  # the restart terminates it
        return list_memories(**kwargs)

    monkeypatch.setattr(selectors, "memory_list", slow_list)

    def restart_once_running() -> None:
        running.wait(timeout=30)
        time.sleep(0.2)
        drill_postgres.stop()
        drill_postgres.start()

    restarter = threading.Thread(target=restart_once_running)
    restarter.start()
    response, seconds = timed(agent.get, "/api/v1/memory")
    restarter.join(timeout=120)
    assert running.is_set()
    _assert_unavailable(response, seconds)

    monkeypatch.setattr(selectors, "memory_list", list_memories)
    listed = agent.get("/api/v1/memory")
    assert listed.status_code == 200
    assert [m["text"] for m in listed.json()["data"]] == ["kept"]
    assert Memory.objects.count() == 1
