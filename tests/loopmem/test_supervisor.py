"""The process supervisor behind `manage.py serve`: a dead child is restarted with backoff, a stop ends them all;
and `manage.py serve` itself survives `kill -9` of its web, worker or beat, its embedded servers untouched."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import redis

from loopmem.runtime.embedded import redis_socket_path
from loopmem.runtime.supervisor import Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
CRASHER = [sys.executable, "-c", "raise SystemExit(3)"]


def supervise(supervisor: Supervisor, until) -> list[str]:
    events: list[str] = []
    supervisor.on_event = events.append
    deadline = time.monotonic() + 20  # a guard against a hang, not a timing assertion
    supervisor.run(until=lambda: until() or time.monotonic() > deadline)
    return events


def test_a_killed_child_is_restarted_and_the_others_keep_running():
    supervisor = Supervisor(commands={"web": SLEEPER, "worker": SLEEPER}, env=os.environ, first_backoff=0.05,
                            poll_interval=0.02)  # fmt: skip
    killed: list[int] = []

    def kill_worker_once_then_wait_for_its_restart() -> bool:
        worker = supervisor.children["worker"]
        if not killed and worker.process is not None:
            killed.append(worker.process.pid)
            os.kill(worker.process.pid, signal.SIGKILL)
        return worker.restarts == 1 and worker.process is not None and worker.process.poll() is None

    events = supervise(supervisor, lambda: kill_worker_once_then_wait_for_its_restart())
    worker = supervisor.children["worker"]
    assert worker.restarts == 1
    assert worker.process is not None
    assert worker.process.pid != killed[0]
    assert supervisor.children["web"].restarts == 0
    assert events == ["worker exited with status -9 after 0s; restarting in 0.05s"]
    # Stopping ended every child.
    assert all(child.process and child.process.poll() is not None for child in supervisor.children.values())


def test_a_child_that_keeps_crashing_backs_off_exponentially_up_to_the_cap():
    supervisor = Supervisor(commands={"beat": CRASHER}, env=os.environ, first_backoff=0.01, max_backoff=0.04,
                            poll_interval=0.01)  # fmt: skip
    events = supervise(supervisor, lambda: supervisor.children["beat"].restarts >= 4)
    waits = [line.rsplit(" ", 1)[1] for line in events[:5]]
    assert waits == ["0.01s", "0.02s", "0.04s", "0.04s", "0.04s"][: len(waits)]
    assert all(line.startswith("beat exited with status 3") for line in events)


def test_a_stop_request_ends_the_loop_and_every_child():
    supervisor = Supervisor(commands={"web": SLEEPER}, env=os.environ, poll_interval=0.01)

    def stop_once_started() -> bool:
        if supervisor.children:
            supervisor.request_stop()
        return False

    supervise(supervisor, stop_once_started)
    assert supervisor.stopping
    web = supervisor.children["web"].process
    assert web is not None
    assert web.poll() is not None


# --- `manage.py serve` itself: the real web, worker and beat, each killed in turn --------------------------------

ROOT = Path(__file__).resolve().parents[2]
CHILD_NAMES = ("web", "worker", "beat")


@dataclass
class Stack:
    """A running `manage.py serve` on its own data dir, so it owns (starts and stops) its embedded servers."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    port: int
    orphans: list[psutil.Process] = field(default_factory=list)  # a killed child's own children

    def children(self) -> dict[str, int]:
        """The supervised children by name (the supervisor's direct children; Redis is one too, not named)."""
        named: dict[str, int] = {}
        for child in psutil.Process(self.process.pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                cmdline = " ".join(child.cmdline())
                for name, marker in (("web", "gunicorn"), ("worker", " worker "), ("beat", " beat ")):
                    if marker in f"{cmdline} " and child.status() != psutil.STATUS_ZOMBIE:
                        named[name] = child.pid
        return named

    def embedded_servers(self) -> tuple[int, int]:
        """(postmaster pid, redis-server pid), each read from the server itself."""
        postmaster = int((self.data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        client = redis.Redis(unix_socket_path=str(redis_socket_path(self.data_dir)), socket_timeout=5)
        return postmaster, int(client.info("server")["process_id"])

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as response:
                return bool(response.status == 200)
        except OSError:
            return False


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout  # a guard against a hang, not a timing assertion
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("serve")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    outside = ("DATABASE_URL", "HEAVY_READ_DATABASE_URL", "REDIS_URL")  # embedded servers: the stack owns them
    env = {key: value for key, value in os.environ.items() if key not in outside} | {
        "LOOPMEM_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOOPMEM_WEB_WORKERS": "1",
        "LOOPMEM_CELERY_CONCURRENCY": "1",
    }
    log = (data_dir / "serve.log").open("wb")
    process = subprocess.Popen([sys.executable, "manage.py", "serve"], cwd=ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT)  # fmt: skip
    running = Stack(process=process, data_dir=data_dir, port=port)
    try:
        started = _wait_for(lambda: running.ready() and set(running.children()) == set(CHILD_NAMES), 300)
        if not started:
            pytest.fail(f"manage.py serve did not start:\n{(data_dir / 'serve.log').read_text(errors='replace')}")
        yield running
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: children first, then the embedded servers
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        for orphan in running.orphans:  # started by this test; gone by now unless their parent's death went unseen
            with contextlib.suppress(psutil.NoSuchProcess):
                orphan.kill()


@pytest.mark.faults
@pytest.mark.parametrize("name", CHILD_NAMES)
def test_serve_restarts_a_child_killed_with_sigkill_and_the_embedded_servers_outlive_it(stack, name):
    servers = stack.embedded_servers()
    before = stack.children()
    victim = psutil.Process(before[name])
    stack.orphans.extend(victim.children(recursive=True))
    victim.kill()

    def restarted() -> bool:
        now = stack.children().get(name)
        return now is not None and now != victim.pid

    log = stack.data_dir / "serve.log"
    assert _wait_for(restarted, 90), log.read_text(errors="replace")
    after = stack.children()
    # Only the killed child was restarted; the stack, its other children and its embedded servers went on.
    assert {k: v for k, v in after.items() if k != name} == {k: v for k, v in before.items() if k != name}
    assert stack.process.poll() is None
    assert stack.embedded_servers() == servers
    assert _wait_for(stack.ready, 90), log.read_text(errors="replace")
    assert f"{name} exited with status -9" in log.read_text(errors="replace")
