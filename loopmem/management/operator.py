"""Shared shape of operator commands: `--json` prints one JSON object; domain errors exit non-zero."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from loopmem.errors import DomainError
from loopmem.runtime.operator_checks import OPERATOR_CHECK_TAGS


class OperatorCommand(BaseCommand):
    """Subclasses implement `run(**options) -> (summary dict, human line)`."""

    # Models and our settings invariants, not the URL checks: those import every API module, DRF and
    # drf-spectacular (~0.4 s) to check routes an operator command never serves.
    requires_system_checks = OPERATOR_CHECK_TAGS

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        self.add_command_arguments(parser)

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        """Arguments of the concrete command."""

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        raise CommandError(f"{type(self).__name__} defines no run()")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            summary, human = self.run(**options)
        except DomainError as exc:
            if options["json"]:
                self.stdout.write(
                    json.dumps({"error": {"code": exc.code, "message": exc.message, "details": exc.details}})
                )
            raise CommandError(
                f"{exc.code}: {exc.message} {json.dumps(exc.details) if exc.details else ''}".strip()
            ) from exc
        if options["json"]:
            self.stdout.write(json.dumps(summary, default=str))
        else:
            self.stdout.write(human)


def tenant_summary(tenant: Any) -> dict[str, Any]:
    """The JSON shape of a tenant in operator output."""
    return {
        "id": str(tenant.id),
        "name": tenant.name,
        "slug": tenant.slug,
        "custody_halted_at": tenant.custody_halted_at.isoformat() if tenant.custody_halted_at else None,
        "rate_limit_requests_per_minute": tenant.rate_limit_per_minute,
    }
