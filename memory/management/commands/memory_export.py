"""memory_export: one subject's memories as NDJSON (the `GET /api/v1/memory/export` format), to a file or stdout."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_get
from memory import envelopes
from memory.models import Memory
from memory.selectors import memory_export_rows


class Command(OperatorCommand):
    help = (
        "Export one subject's long-term memories as NDJSON (one memory per line, oldest first, with provenance "
        "and `supersedes`; never the embedding). `memory_import` reads it back. With --output - (the default) "
        "the memories go to stdout and the summary to stderr."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--subject", required=True, help="the subject (an agent id, or a key id)")
        parser.add_argument("--output", default="-", help="file to write (default -: stdout)")
        parser.add_argument("--include-superseded", action="store_true", help="also the superseded versions")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["output"] != "-":
            super().handle(*args, **options)
            return
        summary, human = self.run(**options)
        # stdout carries the memories: the summary goes to stderr.
        self.stderr.write(json.dumps(summary) if options["json"] else human)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        scope = Scope(tenant_id=tenant.id, subject_id=options["subject"])
        include_superseded = options["include_superseded"]
        rows = Memory.objects.for_scope(scope)
        total = rows.count() if include_superseded else rows.live().count()
        if options["output"] == "-":
            exported = self._write(lambda line: self.stdout.write(line, ending=""), scope, include_superseded, total)
        else:
            with open(options["output"], "w", encoding="utf-8") as out:
                exported = self._write(out.write, scope, include_superseded, total)
        summary = {
            "tenant": tenant.slug,
            "subject": scope.subject_id,
            "output": options["output"],
            "include_superseded": include_superseded,
            "exported": exported,
        }
        return summary, f"exported {exported} memories of {scope.subject_id} ({tenant.slug}) to {options['output']}"

    def _write(self, write: Callable[[str], object], scope: Scope, include_superseded: bool, total: int) -> int:
        exported = 0
        with progress_bar(total=total, desc="export") as bar:
            for line in envelopes.export_lines(memory_export_rows(scope=scope, include_superseded=include_superseded)):
                write(line)
                exported += 1
                bar.update(1)
        return exported
