from argparse import ArgumentParser
from datetime import date
from typing import Any

from knowledge.ledger import (
    SNAPSHOT_LIST_LIMIT,
    retrieval_metrics_compute,
    retrieval_metrics_list,
    retrieval_metrics_run,
)
from knowledge.models import RetrievalMetricsSnapshot
from loopmem.errors import ValidationFailed
from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import tenant_get


class Command(OperatorCommand):
    help = (
        "The daily retrieval-metrics snapshots (searched, followed through, precision, referenced, reference rate), "
        "newest day first: one tenant's with --tenant, else every tenant's. --compute DAY snapshots that UTC day "
        "first (the daily task does yesterday at 04:30)."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", help="tenant id or slug (default: every tenant)")
        parser.add_argument("--limit", type=int, default=SNAPSHOT_LIST_LIMIT, help="snapshots listed, 1-365")
        parser.add_argument("--offset", type=int, default=0)
        parser.add_argument("--compute", metavar="YYYY-MM-DD", help="snapshot this UTC day now, then list")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant_id = tenant_get(id_or_slug=options["tenant"]).id if options["tenant"] else None
        computed = None
        if options["compute"]:
            day = _day(options["compute"])
            if tenant_id is not None:
                retrieval_metrics_compute(tenant_id=tenant_id, day=day)
                computed = 1
            else:
                computed = retrieval_metrics_run(day=day)
        page = retrieval_metrics_list(tenant_id=tenant_id, limit=options["limit"], offset=options["offset"])
        meta: dict[str, Any] = {"limit": page.limit, "offset": page.offset, "total_count": page.total_count}
        if computed is not None:
            meta["computed"] = computed
        lines = [_line(row) for row in page.rows] or ["no snapshots"]
        lines.append(f"{len(page.rows)} of {page.total_count} snapshots (offset {page.offset})")
        return {"data": [_data(row) for row in page.rows], "meta": meta}, "\n".join(lines)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValidationFailed("--compute takes a day as YYYY-MM-DD.", details={"compute": text}) from None


def _data(row: RetrievalMetricsSnapshot) -> dict[str, Any]:
    return {
        "tenant_id": str(row.tenant_id),
        "day": row.day.isoformat(),
        "window_seconds": row.window_seconds,
        "searched": row.searched,
        "followed_through": row.followed_through,
        "precision": row.precision,
        "referenced": row.referenced,
        "reference_rate": row.reference_rate,
        "total_events": row.total_events,
        "unique_keys": row.unique_keys,
        "computed_at": row.computed_at.isoformat(),
    }


def _line(row: RetrievalMetricsSnapshot) -> str:
    return (
        f"{row.day} tenant {row.tenant_id}: searched {row.searched}, followed through {row.followed_through} "
        f"(precision {row.precision:.2f}), referenced {row.referenced} (rate {row.reference_rate:.2f}), "
        f"{row.total_events} events by {row.unique_keys} keys"
    )
