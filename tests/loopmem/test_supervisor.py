"""The process supervisor behind `manage.py serve`: a dead child is restarted with backoff, a stop ends them all."""

from __future__ import annotations

import os
import signal
import sys
import time

from loopmem.supervisor import Supervisor

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
