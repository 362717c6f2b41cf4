from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.db import connection

from loopmem.database.citus import distribute, plan
from loopmem.management.operator import OperatorCommand


class Command(OperatorCommand):
    help = (
        "Distribute every tenant table not yet distributed on the Citus coordinator (needs LOOPMEM_CITUS=true); "
        "--plan prints the statements without running them (any PostgreSQL)."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--plan", action="store_true", help="print the plan, change nothing")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        if options["plan"]:
            with connection.cursor() as cursor:
                steps = plan(cursor)
            summary = {"distributed": steps.distributed, "reference": steps.reference, "statements": steps.statements()}
            return summary, "\n".join(f"{sql};" for sql in steps.statements())
        if not settings.CITUS_ENABLED:
            return {"ran": [], "enabled": False}, "LOOPMEM_CITUS is off: nothing to do"
        ran = distribute(connection)
        return {"ran": ran, "enabled": True}, "\n".join(ran) or "already distributed"
