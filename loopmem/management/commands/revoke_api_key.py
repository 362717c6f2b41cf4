from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import api_key_revoke


class Command(OperatorCommand):
    help = "Revoke an API key by id (idempotent)."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("key_id")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        key = api_key_revoke(key_id=options["key_id"])
        assert key.revoked_at is not None
        return {"id": str(key.id), "revoked_at": key.revoked_at.isoformat()}, f"revoked key {key.id}"
