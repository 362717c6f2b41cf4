"""HNSW and planner options a heavy read asks for, set for its transaction alone and read back as applied."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.db import connections

from loopmem.database.router import HEAVY_READ_ALIAS


@dataclass(frozen=True)
class ReadOptions:
    """HNSW settings a read asks for."""

    ef_search: int | None = None
    iterative_scan: bool = False
    max_scan_tuples: int | None = None
    # Prefer an index that yields the ORDER BY over scanning and sorting (enable_sort off). An ANN read means the
    # HNSW index must answer: the planner prices sorting a few thousand rows by distance below an HNSW scan at
    # ef_search 100 (it does not count fetching each row's TOASTed vector), then runs an exact scan 10-100x slower
    # than the index, while `meta` would report the ANN read.
    index_order: bool = False


@dataclass(frozen=True)
class AppliedOptions:
    """What the read actually ran with (read back from the session, not assumed)."""

    iterative_scan: str  # "off" | "applied" | "unavailable"
    iterative_scan_reason: str | None = None


ITERATIVE_SCAN_UNAVAILABLE_REASON = (
    "The approximate index ran without iterative scanning (pgvector < 0.8 or the setting was refused); "
    "rows may be missing from these results."
)


def apply_read_options(options: ReadOptions) -> AppliedOptions:
    """SET LOCAL the HNSW options for the rest of this transaction, in one statement; report what is in force.

    `set_config` returns the value in force after it ran, so the same round trip reads the options back.
    """
    assignments: list[tuple[str, str]] = []
    if options.ef_search is not None:
        assignments.append(("hnsw.ef_search", str(options.ef_search)))
    supported = not options.iterative_scan or pgvector_supports_iterative_scan()
    if not options.iterative_scan:
        assignments.append(("hnsw.iterative_scan", "off"))
    elif supported:
        assignments.append(("hnsw.iterative_scan", "relaxed_order"))
        if options.max_scan_tuples is not None:
            assignments.append(("hnsw.max_scan_tuples", str(options.max_scan_tuples)))
    if options.index_order:
        assignments.append(("enable_sort", "off"))
    if not assignments:
        return AppliedOptions(iterative_scan="unavailable", iterative_scan_reason=ITERATIVE_SCAN_UNAVAILABLE_REASON)
    calls = ", ".join("set_config(%s, %s, true)" for _ in assignments)
    with connections[HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute(f"SELECT {calls}", [value for pair in assignments for value in pair])
        row = cursor.fetchone()
    if not options.iterative_scan:
        return AppliedOptions(iterative_scan="off")
    in_force = dict(zip((name for name, _ in assignments), row or (), strict=False))
    if in_force.get("hnsw.iterative_scan") == "relaxed_order":
        return AppliedOptions(iterative_scan="applied")
    return AppliedOptions(iterative_scan="unavailable", iterative_scan_reason=ITERATIVE_SCAN_UNAVAILABLE_REASON)


@functools.cache
def pgvector_supports_iterative_scan() -> bool:
    """pgvector ≥ 0.8 has `hnsw.iterative_scan` (asked once per process)."""
    with connections[HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if not row:
        return False
    major, minor = (int(part) for part in row[0].split(".")[:2])
    return (major, minor) >= (0, 8)
