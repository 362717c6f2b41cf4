"""`manage.py mcp`: loopmem's MCP server (stdio, or `--transport streamable-http --host --port`)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agent import mcp_server


class Command(BaseCommand):
    """A thin wrapper over `python -m agent.mcp_server`, which agents should prefer: loading the settings
    here starts the embedded database when DATABASE_URL is unset, and the server never needs it."""

    help = "Serve loopmem's MCP tools as the agent key LOOPMEM_AGENT_KEY against LOOPMEM_URL (see docs/agents.md)."
    # It only calls the HTTP API: no checks, and nothing may write to stdout (the stdio transport owns it).
    requires_system_checks = ()

    def add_arguments(self, parser: ArgumentParser) -> None:
        mcp_server.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = mcp_server.serve(
            settings.AGENT_INTEGRATION, transport=options["transport"], host=options["host"], port=options["port"]
        )
        if status:
            raise CommandError("the MCP server could not start (see above)", returncode=status)
