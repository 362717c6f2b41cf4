"""`manage.py promote_session_hook`: the Claude Code Stop hook (payload on stdin, always exits 0)."""

from __future__ import annotations

import os
import sys
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from agent import stop_hook


class Command(BaseCommand):
    """A thin wrapper over `python -m agent.stop_hook`, which the hook should run instead: loading the
    settings here starts the embedded database when DATABASE_URL is unset, which a hook must not wait for."""

    help = "Promote the session named by a Claude Code hook payload on stdin (see docs/agents.md). Exits 0."
    requires_system_checks = ()

    def add_arguments(self, parser: ArgumentParser) -> None:
        stop_hook.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = stop_hook.run(settings.AGENT_INTEGRATION, stdin=sys.stdin, wait_seconds=options["wait"])
        self.stderr.write(f"loopmem: {outcome.message}")
        if outcome.abandoned:
            self.stderr.flush()
            os._exit(0)
