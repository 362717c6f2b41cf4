from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey
from loopmem.services import api_key_create, tenant_get


class Command(OperatorCommand):
    help = "Issue an API key. The raw key is printed once and never stored."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--role", required=True, choices=ApiKey.Role.values)
        parser.add_argument("--tenant", help="tenant id or slug (not for superadmin keys)")
        parser.add_argument("--agent-id", help="required for agent and orchestrator keys")
        parser.add_argument("--name", default="")
        parser.add_argument("--expires-in", type=int, metavar="SECONDS")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"]) if options["tenant"] else None
        issued = api_key_create(
            role=options["role"],
            tenant=tenant,
            agent_id=options["agent_id"],
            name=options["name"],
            expires_in_seconds=options["expires_in"],
        )
        key = issued.api_key
        summary = {
            "id": str(key.id),
            "key": issued.raw_key,
            "key_prefix": key.key_prefix,
            "role": key.role,
            "tenant_id": str(key.tenant_id) if key.tenant_id else None,
            "agent_id": key.agent_id,
            "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        }
        human = f"created {key.role} key {key.id}\nkey: {issued.raw_key}\nStore it now: it is shown only this once."
        return summary, human
