from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.services import tenant_get
from memory.envelopes import memory_data
from memory.selectors import memory_list_all_subjects
from memory.services import memory_forget_any


class Command(OperatorCommand):
    help = "Superadmin oversight of a tenant's long-term memories: list (any subject) or forget one."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="memories of the tenant, newest first")
        listing.add_argument("--tenant", required=True, help="tenant id or slug")
        listing.add_argument("--subject", help="only this subject")
        listing.add_argument("--source", choices=["explicit", "promoted"])
        listing.add_argument("--include-superseded", action="store_true")
        listing.add_argument("--limit", type=int, default=50)
        listing.add_argument("--offset", type=int, default=0)
        listing.add_argument("--json", action="store_true", help="print one JSON object")
        forget = actions.add_parser("forget", help="delete one memory of the tenant")
        forget.add_argument("--tenant", required=True, help="tenant id or slug")
        forget.add_argument("memory_id")
        forget.add_argument("--json", action="store_true", help="print one JSON object")

    def add_arguments(self, parser: ArgumentParser) -> None:
        # --json lives on each action (argparse reads it after the action name).
        self.add_command_arguments(parser)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        if options["action"] == "forget":
            memory_id = memory_forget_any(
                tenant_id=tenant.id, memory_id=options["memory_id"], actor=Actor.operator("memory_oversight forget")
            )
            return {"id": str(memory_id), "deleted": True}, f"forgot memory {memory_id}"
        rows = memory_list_all_subjects(
            tenant_id=tenant.id, include_superseded=options["include_superseded"], source=options["source"]
        )
        if options["subject"]:
            rows = rows.filter(subject_id=options["subject"])
        limit, offset = max(1, min(options["limit"], 200)), max(0, options["offset"])
        page = list(rows[offset : offset + limit])
        data = [memory_data(memory) for memory in page]
        total_count = rows.count()
        summary = {"data": data, "meta": {"total_count": total_count, "limit": limit, "offset": offset}}
        lines = [
            f"{m['inserted_at']}  {m['subject_id']:<24} {m['source']:<9} {m['id']}  {m['text'][:60]}" for m in data
        ]
        human = "\n".join([*lines, f"{len(page)} of {total_count} memories"])
        return summary, human
