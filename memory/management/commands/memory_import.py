"""memory_import: read an export (NDJSON or a JSON array) into one subject, as `POST /api/v1/memory/import`."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any

from django.conf import settings

from loopmem.errors import PayloadTooLarge, QuotaExceeded
from loopmem.management.operator import OperatorCommand
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_get
from memory.import_body import MAX_IMPORT_BYTES, import_rows
from memory.importing import memory_import


class Command(OperatorCommand):
    help = (
        "Import memories into one subject from NDJSON or a JSON array (an export of memory_export or "
        "GET /api/v1/memory/export): supersede chains are rebuilt, rows are written with source `imported`, and "
        "what the subject already holds is skipped, so importing twice adds nothing. Quota applies."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--subject", required=True, help="the subject (an agent id, or a key id)")
        parser.add_argument("input", nargs="?", default="-", help="file to read (default -: stdin)")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        scope = Scope(tenant_id=tenant.id, subject_id=options["subject"])
        if options["input"] == "-":
            raw = sys.stdin.buffer.read(MAX_IMPORT_BYTES + 1)
        else:
            with open(options["input"], "rb") as source:
                raw = source.read(MAX_IMPORT_BYTES + 1)
        if len(raw) > MAX_IMPORT_BYTES:
            raise PayloadTooLarge(details={"max_bytes": MAX_IMPORT_BYTES})
        rows = import_rows(raw)
        with progress_bar(total=len(rows), desc="import") as bar:
            report = memory_import(scope=scope, rows=rows, progress=bar.update)
        if report.stopped_at is not None:
            raise QuotaExceeded(
                f"The subject's quota was reached at line {report.stopped_at}: {report.created} memories were "
                "written before it.",
                details={
                    **report.as_dict(),
                    "written": report.created,
                    "stopped_at_line": report.stopped_at,
                    "quota": settings.MEMORY_QUOTA,
                },
            )
        summary = {"tenant": tenant.slug, "subject": scope.subject_id, **report.as_dict()}
        human = (
            f"imported {report.created} of {report.lines} memories into {scope.subject_id} ({tenant.slug}); "
            f"{report.skipped} already held, {report.linked} supersede links"
        )
        return summary, human
