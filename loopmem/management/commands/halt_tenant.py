from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand, tenant_summary
from loopmem.tenancy.services import tenant_get, tenant_halt


class Command(OperatorCommand):
    help = "Halt a tenant's custody: its keys may read but every write answers 503 tenant_halted."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("tenant", help="tenant id or slug")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_halt(tenant=tenant_get(id_or_slug=options["tenant"]))
        return tenant_summary(tenant), f"halted tenant {tenant.slug} at {tenant.custody_halted_at}"
