from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand, tenant_summary
from loopmem.tenancy.services import tenant_create


class Command(OperatorCommand):
    help = "Create a tenant."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--slug")
        parser.add_argument("--rate-limit", type=int, help="requests per minute per key (default: deployment's)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_create(name=options["name"], slug=options["slug"], rate_limit_per_minute=options["rate_limit"])
        return tenant_summary(tenant), f"created tenant {tenant.slug} ({tenant.id})"
