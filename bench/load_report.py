"""What `manage.py loadtest` prints from a locust run: throughput, latency per operation, errors by status, and
the lost-write check (every write the service acknowledged with a 201 must be in the database afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from bench.harness import percentiles
from loopmem.models import Tenant
from memory.models import Memory, SessionTurn


@dataclass(frozen=True)
class LostWriteCheck:
    """Acknowledged writes against what the database holds, per kind."""

    acknowledged: dict[str, int]
    present: dict[str, int]

    @property
    def lost(self) -> int:
        return sum(self.acknowledged.values()) - sum(self.present.values())

    def line(self) -> str:
        kinds = ", ".join(f"{kind} {self.present[kind]}/{self.acknowledged[kind]}" for kind in self.acknowledged)
        return (
            f"acknowledged {sum(self.acknowledged.values())}, present {sum(self.present.values())}, "
            f"lost {self.lost}  ({kinds})"
        )


def lost_write_check(*, tenant: Tenant, acknowledged: Mapping[str, Sequence[str]]) -> LostWriteCheck:
    """Read every acknowledged id back from the database, within the load tenant."""
    memories = {uuid.UUID(value) for value in acknowledged.get("memories", [])}
    turns = {uuid.UUID(value) for value in acknowledged.get("turns", [])}
    return LostWriteCheck(
        acknowledged={"memories": len(memories), "turns": len(turns)},
        present={
            "memories": _present(Memory.objects.filter(tenant=tenant), memories),
            "turns": _present(SessionTurn.objects.filter(tenant=tenant), turns),
        },
    )


def _present(rows: QuerySet[Any], ids: set[uuid.UUID]) -> int:
    ordered = sorted(ids, key=str)
    # Bounded IN lists: a long run acknowledges tens of thousands of writes.
    return sum(rows.filter(id__in=chunk).count() for chunk in _chunks(ordered, 5000))


def _chunks(values: list[uuid.UUID], size: int) -> list[list[uuid.UUID]]:
    return [values[start : start + size] for start in range(0, len(values), size)]


def operation_table(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per operation (and "all"): requests, requests/s, p50/p95/p99 ms, non-2xx count."""
    seconds = max(float(results["seconds"]), 1e-9)
    samples: Mapping[str, list[float]] = results["samples_ms"]
    statuses: Mapping[str, Mapping[str, int]] = results["statuses"]
    table: dict[str, dict[str, Any]] = {}
    every: list[float] = []
    for name in sorted(samples):
        every.extend(samples[name])
        table[name] = _row(samples[name], statuses.get(name, {}), seconds)
    if every:
        merged: dict[str, int] = {}
        for by_status in statuses.values():
            for status, count in by_status.items():
                merged[status] = merged.get(status, 0) + count
        table["all"] = _row(every, merged, seconds)
    return table


def _row(samples: list[float], statuses: Mapping[str, int], seconds: float) -> dict[str, Any]:
    figures = percentiles(samples)
    return {
        "requests": len(samples),
        "per_second": round(len(samples) / seconds, 1),
        "p50_ms": figures["p50"],
        "p95_ms": figures["p95"],
        "p99_ms": figures["p99"],
        "errors": sum(count for status, count in statuses.items() if not status.startswith("2")),
    }


def errors_by_status(results: Mapping[str, Any]) -> dict[str, int]:
    """Every non-2xx answer by status ("0": no HTTP answer at all), summed over operations."""
    counts: dict[str, int] = {}
    for by_status in results["statuses"].values():
        for status, count in by_status.items():
            if not status.startswith("2"):
                counts[status] = counts.get(status, 0) + count
    return dict(sorted(counts.items()))


def server_errors(by_status: Mapping[str, int]) -> int:
    return sum(count for status, count in by_status.items() if status.startswith("5"))


def render(
    *, header: str, table: Mapping[str, Mapping[str, Any]], by_status: Mapping[str, int], check: LostWriteCheck,
    load_before: Sequence[float], load_after: Sequence[float],
) -> str:  # fmt: skip
    """The human report, load average first and last, so no figure travels without the machine's load."""
    lines = [header, f"load average before: {_load(load_before)}", ""]
    lines.append(
        f"{'operation':<18}{'requests':>10}{'req/s':>9}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'errors':>8}"
    )
    for name, row in table.items():
        lines.append(
            f"{name:<18}{row['requests']:>10}{row['per_second']:>9}{row['p50_ms']:>10}{row['p95_ms']:>10}"
            f"{row['p99_ms']:>10}{row['errors']:>8}"
        )
    shown = ", ".join(f"{status or '0'}: {count}" for status, count in by_status.items()) or "none"
    lines += [
        "",
        f"errors by status: {shown}  (0 = no HTTP answer)",
        f"5xx: {server_errors(by_status)}",
        check.line(),
        f"load average after: {_load(load_after)}",
    ]
    return "\n".join(lines)


def _load(values: Sequence[float]) -> str:
    return " ".join(f"{value:.2f}" for value in values) + " (1, 5, 15 min)"
