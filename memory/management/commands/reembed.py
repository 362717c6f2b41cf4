import os
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError

from knowledge.embedding import ARTICLE_EMBEDDINGS
from loopmem.embedding import embedders
from loopmem.embedding.pipeline import EmbeddedTable, backfill, reembed_lacking, reembed_pending, reembed_swap
from loopmem.management.operator import OperatorCommand
from loopmem.models import Tenant
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.services import tenant_get, tenant_set_provider
from memory.embedding import MEMORY_EMBEDDINGS

# Untyped beyond EmbeddedTable: the loop treats memories and articles alike.
TABLES: tuple[EmbeddedTable[Any], ...] = (MEMORY_EMBEDDINGS, ARTICLE_EMBEDDINGS)


class Command(OperatorCommand):
    help = (
        "Without --provider: embed every memory of a tenant that has no vector or one of another model. With "
        "--provider: move the tenant to that model without downtime: new vectors are made beside the old ones "
        "(recall keeps using the old model meanwhile), then one transaction swaps them in and switches the "
        "tenant. Resumable: run it again after a crash or an outage and it continues."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--batch-size", type=int, default=32)
        parser.add_argument("--provider", help="the target provider (local, openai, hashing)")
        parser.add_argument("--model", default="", help="the target model (default: the provider's default)")
        parser.add_argument("--base-url", default="", help="the target's OpenAI-compatible endpoint")
        parser.add_argument("--api-key-env", default="", help="the environment variable holding the target's key")
        parser.add_argument("--dry-run", action="store_true", help="say what would be embedded; change nothing")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        if options["provider"]:
            return self._move(tenant, options)
        if options["model"] or options["base_url"] or options["api_key_env"]:
            raise CommandError("--model, --base-url and --api-key-env name a target: give --provider too")
        return self._backfill(tenant, options)

    def _backfill(self, tenant: Tenant, options: dict[str, Any]) -> tuple[dict[str, Any], str]:
        model_id = embedders.spec_for(tenant).model_id
        total = MEMORY_EMBEDDINGS.stale(tenant).count()
        if options["dry_run"]:
            return {"tenant_id": str(tenant.id), "model": model_id, "stale": total, "dry_run": True}, (
                f"would reembed {total} memories of {tenant.slug} with {model_id}"
            )
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

    def _move(self, tenant: Tenant, options: dict[str, Any]) -> tuple[dict[str, Any], str]:
        provider = options["provider"]
        api_key = ""
        if options["api_key_env"]:
            api_key = os.environ.get(options["api_key_env"], "")
            if not api_key:
                raise CommandError(f"the environment variable {options['api_key_env']} is empty or unset")
        elif provider == tenant.embedding_provider and options["base_url"] == tenant.embedding_base_url:
            api_key = tenant.embedding_api_key  # the tenant's own key, to the endpoint it already goes to
        target = embedders.spec_of(
            provider=provider, model=options["model"], base_url=options["base_url"], api_key=api_key
        )
        current = embedders.spec_for(tenant).model_id
        summary: dict[str, Any] = {"tenant_id": str(tenant.id), "from_model": current, "model": target.model_id}
        lacking = {t.model._meta.db_table: reembed_lacking(t, tenant=tenant, target=target) for t in TABLES}
        if options["dry_run"]:
            summary.update(dry_run=True, to_embed=lacking)
            return summary, f"would embed up to {sum(lacking.values())} rows of {tenant.slug} with {target.model_id}"
        tables: dict[str, dict[str, Any]] = {}
        with progress_bar(total=sum(lacking.values()), desc=f"reembed {tenant.slug}") as bar:
            for table in TABLES:
                progress = reembed_pending(
                    table, tenant=tenant, target=target, batch_size=options["batch_size"], on_batch=bar.update
                )
                tables[table.model._meta.db_table] = {
                    "rows": progress.rows,
                    "ready": progress.ready,
                    "embedded": progress.embedded,
                    "failed": progress.report.failed,
                    "failures": progress.report.failures,
                    "complete": progress.complete,
                }
        summary["tables"] = tables
        if not all(t["complete"] for t in tables.values()):
            summary["swapped"] = False
            failed = sum(t["failed"] for t in tables.values())
            return summary, (
                f"{tenant.slug} still answers with {current}: {failed} rows could not be embedded with "
                f"{target.model_id}; run again to continue"
            )

        def switch() -> None:
            tenant_set_provider(
                tenant=tenant,
                embedding=target.provider,
                embedding_model=target.model,
                embedding_base_url=options["base_url"],
                embedding_api_key=api_key,
            )

        try:
            swapped = reembed_swap(TABLES, tenant=tenant, target=target, switch_tenant=switch)
        except embedders.EmbeddingFailure as failure:
            summary.update(swapped=False, failures={failure.tag: 1})
            return summary, f"{tenant.slug} still answers with {current}: the swap failed ({failure.tag}); run again"
        summary.update(swapped=True, swapped_rows=swapped)
        # Rows whose old-model vector landed while the swap ran are now stale: embed them with the new model at
        # once rather than at the next sweep.
        for table in TABLES:
            backfill(table, tenant=tenant, limit=10_000)
        return summary, f"{tenant.slug} moved from {current} to {target.model_id} ({sum(swapped.values())} rows)"
