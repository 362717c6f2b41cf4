from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.services import tenant_get
from privacy.erasure import ERASE_BATCH_SIZE, subject_erase
from privacy.management.erasing import erase_counted


class Command(OperatorCommand):
    help = (
        "Erase one subject of a tenant: its memories (superseded too), session turns, promotion jobs and "
        "watermarks, the query text of its access-ledger rows, its recall-history keys in Redis; the articles it "
        "owns are listed, and removed only with --include-articles. In batches, on record (audit_log), idempotent: "
        "run it again to finish an interrupted erase."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--subject", required=True, help="the subject id (an agent_id, or a key's id)")
        parser.add_argument("--include-articles", action="store_true", help="also remove the articles it owns")
        parser.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
        parser.add_argument("--batch-size", type=int, default=ERASE_BATCH_SIZE)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        args = {
            "tenant": tenant,
            "subject_id": options["subject"],
            "actor": Actor.operator("erase_subject"),
            "include_articles": options["include_articles"],
            "batch_size": max(1, options["batch_size"]),
        }
        return erase_counted(
            subject_erase, dry_run=options["dry_run"], label=f"subject {options['subject']} of {tenant.slug}", **args
        )
