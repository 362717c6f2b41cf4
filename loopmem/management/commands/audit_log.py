from argparse import ArgumentParser, ArgumentTypeError
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.audit import audit_rows
from loopmem.tenancy.services import tenant_get

FIELDS = (
    "id",
    "recorded_at",
    "actor_key_id",
    "actor_role",
    "action",
    "table_name",
    "row_id",
    "text_hash",
    "subject_hash",
    "reason",
)


def since(value: str) -> datetime:
    """An ISO 8601 date or datetime; naive means UTC."""
    parsed = parse_datetime(value)
    if parsed is None:
        day = parse_date(value)
        if day is None:
            raise ArgumentTypeError(f"not an ISO 8601 date or datetime: {value!r}")
        parsed = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


class Command(OperatorCommand):
    help = (
        "Read a tenant's deletion audit, oldest first: who (key id and role), what (table, row id, keyed hash of "
        "the text), when and why, for every forget, supersede, erase and oversight delete. Never the text."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--since", type=since, help="from this ISO 8601 date or datetime (UTC if naive)")
        parser.add_argument("--subject", help="only rows of this subject (matched by its keyed hash)")
        parser.add_argument("--limit", type=int, default=200, help="at most this many rows (default 200)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        rows = audit_rows(tenant_id=tenant.id, since=options["since"], subject_id=options["subject"])
        limit = max(1, options["limit"])
        page = list(rows.values(*FIELDS)[:limit])
        data = [{**row, "recorded_at": row["recorded_at"].isoformat()} for row in page]
        for row in data:
            row["actor_key_id"] = str(row["actor_key_id"]) if row["actor_key_id"] else None
        total = rows.count()
        lines = [
            f"{r['recorded_at']}  {r['action']:<9} {r['table_name']:<22} {r['row_id']:<36}  "
            f"{r['actor_role']:<10} {r['reason']}"
            for r in data
        ]
        return {"data": data, "meta": {"total_count": total, "limit": limit}}, "\n".join(
            [*lines, f"{len(data)} of {total} audit row(s) of {tenant.slug}"]
        )
