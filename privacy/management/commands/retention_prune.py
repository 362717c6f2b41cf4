from dataclasses import asdict
from typing import Any

from loopmem.management.operator import OperatorCommand
from privacy.retention import retention_prune


class Command(OperatorCommand):
    help = (
        "Run the hourly retention prune now: access-ledger rows and finished promotion jobs older than "
        "LOOPMEM_RETENTION_DAYS go, query texts older than LOOPMEM_QUERY_TEXT_RETENTION_DAYS are removed, "
        "idempotency records older than LOOPMEM_IDEMPOTENCY_RETENTION_SECONDS go."
    )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        report = retention_prune()
        return asdict(report), (
            f"retention prune: {report.access_events_deleted} access event(s) and {report.promotion_jobs_deleted} "
            f"promotion job(s) deleted, {report.queries_blanked} query text(s) removed, "
            f"{report.idempotency_records_deleted} idempotency record(s) deleted"
        )
