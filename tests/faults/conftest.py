"""Fault drills: each starts its own dependency (a redis-server, a PostgreSQL, an HTTP embedding provider), points
the settings at it, and breaks it on purpose (docs/reliability.md, "Fault drills")."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from config.celery import app as celery_app
from loopmem.redis import outage
from loopmem.runtime.embedded import redis_server_binary

STARTUP_SECONDS = 10


class DrillRedis:
    """A redis-server of the drill's own, on a unix socket in a temporary directory: stopped, frozen, revived."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        self.socket.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                *(redis_server_binary(), "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700"),
                *("--dir", str(self.directory), "--save", "", "--appendonly", "yes"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self.answers():
            if time.monotonic() > deadline:
                raise RuntimeError("the drill's redis-server did not start")
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=0.5).ping())
        except (redis.RedisError, OSError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)  # a frozen server cannot act on SIGTERM
            self.process.terminate()
            self.process.wait(timeout=STARTUP_SECONDS)

    def freeze(self) -> None:
        """SIGSTOP: the socket still accepts connections, and nothing ever answers."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def queued(self, queue: str) -> list[Any]:
        """The Celery messages waiting in `queue` (kombu's Redis transport keeps each queue in a list)."""
        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2)
        return list(client.lrange(queue, 0, -1))


def _use_broker(url: str) -> None:
    # The Celery app read its broker from settings once; point it (and its connection pools) at `url`.
    celery_app.conf.broker_url = url.replace("unix://", "redis+socket://", 1)
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def drill_redis() -> Iterator[DrillRedis]:
    """Cache, rate limits, breaker, gate, recall history and the Celery broker, all on the drill's own Redis."""
    with tempfile.TemporaryDirectory(prefix="loopmem-drill-redis-") as directory:
        server = DrillRedis(Path(directory))
        server.start()
        caches = {"default": {**settings.CACHES["default"], "LOCATION": server.url}}
        original_broker = celery_app.conf.broker_url
        outage.reset()
        try:
            with override_settings(REDIS_URL=server.url, CACHES=caches):
                _use_broker(server.url)
                yield server
        finally:
            server.stop()
            _use_broker(original_broker)
            outage.reset()


def elapsed(started: float) -> float:
    return time.monotonic() - started


def timed(call: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call(*args, **kwargs)
    return result, elapsed(started)
