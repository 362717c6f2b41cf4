from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.models import SecretPolicy
from loopmem.tenancy.services import tenant_get, tenant_set_policy


class Command(OperatorCommand):
    help = (
        "Set a tenant's policies. --secrets: what a write holding a secret does: refuse (the default: 422 "
        "secret_detected, nothing stored), redact (stored with [REDACTED:<kind>]) or allow (stored as sent)."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--secrets", choices=SecretPolicy.values, help="the secret policy of every write")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_set_policy(tenant=tenant_get(id_or_slug=options["tenant"]), secrets=options["secrets"])
        summary = {"tenant_id": str(tenant.id), "slug": tenant.slug, "secret_policy": tenant.secret_policy}
        return summary, f"policies of {tenant.slug}: secrets={tenant.secret_policy}"
