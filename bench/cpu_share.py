"""Where the CPU went during a load run on this machine: CPU seconds per kind of process, read from the kernel.

A load run on the service's own machine shares its cores with the service, so its capacity is bounded by the CPU
that one request costs in every process it touches: the web worker that answers it, the Celery worker that embeds
what it wrote, PostgreSQL, Redis, and the load generator itself. Each kind's CPU seconds over the run, divided by
the requests answered, is that cost. The load generator is a child of the caller and is read from the caller's
children's resource usage once it has exited; every other process is found by its command line (`psutil`), and its
CPU time is counted between two snapshots, so a process started or ended in between counts only what the second
snapshot saw.
"""

from __future__ import annotations

import resource
from collections.abc import Mapping

import psutil

LOAD_GENERATOR = "load generator"
# A process's kind by the words its command line holds, the first kind whose words it holds all wins.
KINDS = (
    (("gunicorn",), "web"),
    (("celery", "beat"), "beat"),
    (("celery",), "celery worker"),
    (("postgres",), "postgresql"),
    (("redis-server",), "redis"),
)

Snapshot = dict[tuple[int, str], float]  # (pid, kind) -> CPU seconds (user + system)


def kind_of(command_line: str) -> str | None:
    """The kind of process a command line names (beat before the Celery worker), or None for any other."""
    for words, kind in KINDS:
        if all(word in command_line for word in words):
            return kind
    return None


def snapshot() -> tuple[Snapshot, float]:
    """CPU seconds of every process of a known kind, and the caller's children's (the load generator's) so far."""
    seen: Snapshot = {}
    for process in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        kind = kind_of(" ".join(process.info["cmdline"] or []))
        times = process.info["cpu_times"]
        if kind is not None and times is not None:
            seen[(process.info["pid"], kind)] = times.user + times.system
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seen, children.ru_utime + children.ru_stime


def cpu_seconds(before: tuple[Snapshot, float], after: tuple[Snapshot, float]) -> dict[str, float]:
    """CPU seconds per kind between two snapshots, the load generator's included."""
    (processes_before, children_before), (processes_after, children_after) = before, after
    spent: dict[str, float] = {}
    for (pid, kind), seconds in processes_after.items():
        spent[kind] = spent.get(kind, 0.0) + seconds - processes_before.get((pid, kind), 0.0)
    spent[LOAD_GENERATOR] = children_after - children_before
    return {kind: round(seconds, 2) for kind, seconds in sorted(spent.items(), key=lambda pair: -pair[1])}


def per_request_ms(spent: Mapping[str, float], requests: int) -> dict[str, float]:
    """Each kind's CPU milliseconds per answered request, and their sum ("all")."""
    if requests == 0:
        return {}
    costs = {kind: round(seconds * 1000 / requests, 2) for kind, seconds in spent.items()}
    costs["all"] = round(sum(spent.values()) * 1000 / requests, 2)
    return costs
