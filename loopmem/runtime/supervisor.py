"""Keep a set of child processes running: a child that dies (a crash, `kill -9`) is restarted with backoff, and
only a stop request (Ctrl-C, SIGTERM) ends the set. `manage.py serve` supervises web, worker and beat with it so
one dead process never takes the whole stack, or the embedded servers it owns, down with it."""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 15


@dataclass
class Child:
    """One supervised process: its command, the running process, and its restart bookkeeping."""

    name: str
    command: Sequence[str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 0.0
    restart_at: float | None = None  # when a dead child is due to start again


@dataclass
class Supervisor:
    """Start every child, restart the dead ones with exponential backoff (reset after a stable run), stop on request.

    `first_backoff` doubles on each quick death up to `max_backoff`; a child that ran `stable_after` seconds starts
    again from `first_backoff`.
    """

    commands: Mapping[str, Sequence[str]]
    env: Mapping[str, str]
    child_envs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per child, over `env`
    first_backoff: float = 1.0
    max_backoff: float = 30.0
    stable_after: float = 60.0
    poll_interval: float = 0.5
    on_event: Callable[[str], object] = logger.warning
    children: dict[str, Child] = field(default_factory=dict)
    stopping: bool = False

    def request_stop(self, *_: object) -> None:
        self.stopping = True

    def run(self, *, until: Callable[[], bool] = lambda: False) -> None:
        """Supervise until a stop is requested (or `until()` says so); then stop every child."""
        try:
            for name, command in self.commands.items():
                self.children[name] = child = Child(name=name, command=command)
                self._start(child)
            while not self.stopping and not until():
                self.tick()
                time.sleep(self.poll_interval)
        finally:
            self.stop_all()

    def tick(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.restarts += 1
                    self._start(child)
                continue
            assert child.process is not None
            status = child.process.poll()
            if status is None:
                continue
            ran = now - child.started_at
            child.backoff = (
                self.first_backoff if ran >= self.stable_after or not child.backoff
                else min(child.backoff * 2, self.max_backoff)
            )  # fmt: skip
            child.restart_at = now + child.backoff
            self.on_event(
                f"{child.name} exited with status {status} after {ran:.0f}s; restarting in {child.backoff:g}s"
            )

    def _start(self, child: Child) -> None:
        # Own session: the terminal's Ctrl-C reaches only the supervisor, which stops children in order.
        env = {**self.env, **self.child_envs.get(child.name, {})}
        child.process = subprocess.Popen(list(child.command), env=env, start_new_session=True)
        child.started_at = time.monotonic()

    def stop_all(self) -> None:
        running = [c.process for c in self.children.values() if c.process is not None and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
