import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from loopmem.management.operator import OperatorCommand
from loopmem.models import ApiKey
from loopmem.tenancy.key_batches import api_keys_create_many, numbered_specs, specs_from_lines
from loopmem.tenancy.services import IssuedKey, api_key_create, tenant_get


class Command(OperatorCommand):
    help = (
        "Issue an API key (or many: --count N, --from-file PATH with one JSON object a line, '-' for stdin). "
        "Raw keys are printed once and never stored; a batch is all or nothing."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--role", choices=ApiKey.Role.values, help="required unless --from-file")
        parser.add_argument("--tenant", help="tenant id or slug (not for superadmin keys)")
        parser.add_argument("--agent-id", help="required for agent and orchestrator keys (a prefix with --count)")
        parser.add_argument("--name", default="")
        parser.add_argument("--expires-in", type=int, metavar="SECONDS")
        batch = parser.add_mutually_exclusive_group()
        batch.add_argument("--count", type=int, metavar="N", help="issue N keys alike (agent ids get -1 … -N)")
        batch.add_argument(
            "--from-file", metavar="PATH", help='JSON lines: {"role", "tenant", "agent_id", "name", "expires_in"}'
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        if options["from_file"] or options["count"] is not None:
            return self._run_batch(options)
        if not options["role"]:
            raise CommandError("--role is required (or --from-file)")
        tenant = tenant_get(id_or_slug=options["tenant"]) if options["tenant"] else None
        issued = api_key_create(
            role=options["role"],
            tenant=tenant,
            agent_id=options["agent_id"],
            name=options["name"],
            expires_in_seconds=options["expires_in"],
        )
        human = (
            f"created {issued.api_key.role} key {issued.api_key.id}\nkey: {issued.raw_key}\n"
            "Store it now: it is shown only this once."
        )
        return _summary(issued), human

    def _run_batch(self, options: dict[str, Any]) -> tuple[dict[str, Any], str]:
        if options["from_file"]:
            source = options["from_file"]
            lines = sys.stdin.read().splitlines() if source == "-" else Path(source).read_text().splitlines()
            specs = specs_from_lines(lines)
        else:
            if not options["role"]:
                raise CommandError("--role is required with --count")
            specs = numbered_specs(
                count=options["count"],
                role=options["role"],
                tenant=options["tenant"],
                agent_id=options["agent_id"],
                name=options["name"],
                expires_in=options["expires_in"],
            )
        keys = [_summary(issued) for issued in api_keys_create_many(specs=specs)]
        human = "\n".join(f"{key['id']} {key['role']} {key['agent_id'] or '-'} {key['key']}" for key in keys)
        human += f"\ncreated {len(keys)} keys. Store them now: they are shown only this once."
        return {"count": len(keys), "keys": keys}, human


def _summary(issued: IssuedKey) -> dict[str, Any]:
    key = issued.api_key
    return {
        "id": str(key.id),
        "key": issued.raw_key,
        "key_prefix": key.key_prefix,
        "role": key.role,
        "tenant_id": str(key.tenant_id) if key.tenant_id else None,
        "agent_id": key.agent_id,
        "name": key.name,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
    }
