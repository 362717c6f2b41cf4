"""Operator commands start fast: what they import and which checks they run (no wall-clock asserts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.core.management import load_command_class

from loopmem.runtime.operator_checks import OPERATOR_CHECK_TAGS

ROOT = Path(__file__).resolve().parents[2]
# Each of these costs a large share of a second to import and no operator command needs it to start.
HEAVY = ("onnxruntime", "openai", "mcp", "tokenizers", "drf_spectacular.plumbing", "rest_framework.views")


def test_setting_up_django_and_loading_a_command_imports_nothing_heavy():
    probe = (
        "import django, json, sys; django.setup();"
        "from django.core.management import load_command_class;"
        "load_command_class('loopmem', 'create_api_key'); load_command_class('memory', 'memory_stats');"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_operator_commands_skip_the_url_checks_but_keep_the_settings_invariants():
    for app, name in [("loopmem", "create_api_key"), ("loopmem", "create_tenant"), ("memory", "memory_stats")]:
        command = load_command_class(app, name)
        assert command.requires_system_checks == OPERATOR_CHECK_TAGS
    assert "urls" not in OPERATOR_CHECK_TAGS
