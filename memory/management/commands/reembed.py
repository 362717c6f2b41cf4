from argparse import ArgumentParser
from typing import Any

from loopmem import embeddings
from loopmem.embedding_pipeline import backfill
from loopmem.management.operator import OperatorCommand
from loopmem.progress import progress_bar
from loopmem.services import tenant_get
from memory.services import MEMORY_EMBEDDINGS


class Command(OperatorCommand):
    help = "Embed every memory of a tenant that has no vector or one of another model (after a provider change)."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--batch-size", type=int, default=32)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        model_id = embeddings.spec_for(tenant).model_id
        total = MEMORY_EMBEDDINGS.stale(tenant).count()
        with progress_bar(total=total, desc=f"reembed {tenant.slug}") as bar:
            report = backfill(
                MEMORY_EMBEDDINGS, tenant=tenant, limit=total, batch_size=options["batch_size"], on_batch=bar.update
            )
        summary = {
            "tenant_id": str(tenant.id),
            "model": model_id,
            "stale": total,
            "embedded": report.embedded,
            "failed": report.failed,
            "failures": report.failures,
        }
        human = f"reembedded {report.embedded}/{total} memories of {tenant.slug} with {model_id}"
        if report.failed:
            human += f"; {report.failed} failed ({report.failures}), run again when the provider is back"
        return summary, human
