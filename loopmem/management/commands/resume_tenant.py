from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand, tenant_summary
from loopmem.tenancy.services import tenant_get, tenant_resume


class Command(OperatorCommand):
    help = "Lift a tenant's custody halt."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("tenant", help="tenant id or slug")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_resume(tenant=tenant_get(id_or_slug=options["tenant"]))
        return tenant_summary(tenant), f"resumed tenant {tenant.slug}"
