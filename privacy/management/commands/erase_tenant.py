from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.services import tenant_get
from privacy.erasure import ERASE_BATCH_SIZE, tenant_erase
from privacy.management.erasing import erase_counted


class Command(OperatorCommand):
    help = (
        "Erase every subject of a tenant: what erase_subject removes, tenant-wide (all query texts of its access "
        "ledger, all its recall keys in Redis); every article of the tenant only with --include-articles. The "
        "tenant, its keys and projects stay. In batches, on record (audit_log), idempotent."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--include-articles", action="store_true", help="also remove every article")
        parser.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
        parser.add_argument("--batch-size", type=int, default=ERASE_BATCH_SIZE)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        args = {
            "tenant": tenant,
            "actor": Actor.operator("erase_tenant"),
            "include_articles": options["include_articles"],
            "batch_size": max(1, options["batch_size"]),
        }
        return erase_counted(tenant_erase, dry_run=options["dry_run"], label=f"tenant {tenant.slug}", **args)
