from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import tenant_get, tenant_provider_summary, tenant_set_provider


class Command(OperatorCommand):
    help = "Set a tenant's embedding / LLM provider overrides. API keys are stored encrypted; '' clears a field."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        for flag in (
            "embedding",
            "embedding-model",
            "embedding-base-url",
            "embedding-api-key",
            "llm",
            "llm-model",
            "llm-base-url",
            "llm-api-key",
        ):
            parser.add_argument(f"--{flag}")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_set_provider(
            tenant=tenant_get(id_or_slug=options["tenant"]),
            embedding=options["embedding"],
            embedding_model=options["embedding_model"],
            embedding_base_url=options["embedding_base_url"],
            embedding_api_key=options["embedding_api_key"],
            llm=options["llm"],
            llm_model=options["llm_model"],
            llm_base_url=options["llm_base_url"],
            llm_api_key=options["llm_api_key"],
        )
        summary = {"tenant_id": str(tenant.id), **tenant_provider_summary(tenant)}
        return summary, f"providers of {tenant.slug}: {summary}"
