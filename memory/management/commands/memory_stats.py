from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import tenant_get
from memory.stats import memory_stats


class Command(OperatorCommand):
    help = (
        "Per tenant: memories live / superseded / waiting for a vector, subjects and quota headroom, session turns, "
        "promotion jobs and budget, graduation. One tenant with --tenant, else every tenant."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", help="tenant id or slug (default: every tenant)")
        parser.add_argument("--top-subjects", type=int, default=20, metavar="N", help="subjects listed per tenant")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant_ids = [tenant_get(id_or_slug=options["tenant"]).id] if options["tenant"] else None
        stats = memory_stats(tenant_ids=tenant_ids, top_subjects=max(options["top_subjects"], 0))
        lines = []
        for tenant in stats:
            memories, subjects, promotion = tenant["memories"], tenant["subjects"], tenant["promotion"]
            lines.append(
                f"{tenant['slug']}: {memories['live']} live, {memories['superseded']} superseded, "
                f"{memories['waiting_for_embedding']} waiting for a vector; {subjects['count']} subjects "
                f"({subjects['at_quota']} at quota, least headroom {subjects['least_headroom']}); "
                f"{tenant['session_turns']['live']} session turns; promotion {promotion['jobs']} "
                f"budget left {promotion['budget_headroom']}/{promotion['budget_per_hour']}; "
                f"graduated {tenant['graduation']['graduated']}, waiting {tenant['graduation']['waiting']}"
            )
        return {"tenants": stats}, "\n".join(lines) or "no tenants"
