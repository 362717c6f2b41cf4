"""bench_ratelimit times the limiter against the real Redis (its figures are for humans, never asserted)."""

from __future__ import annotations

import io
import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings


def test_the_benchmark_reports_each_measured_call():
    out = io.StringIO()
    call_command("bench_ratelimit", "--calls", "5", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["calls"] == 5
    assert set(summary["per_call_us"]) == {"mean", "p50", "p95", "p99"}
    assert len(summary["load_average_before"]) == 3


def test_the_benchmark_refuses_to_time_the_fail_open_path(tmp_path):
    dead = {"default": {**settings.CACHES["default"], "LOCATION": f"unix://{tmp_path}/nothing-here.sock"}}
    with override_settings(CACHES=dead), pytest.raises(CommandError, match="failing open"):
        call_command("bench_ratelimit", "--calls", "5", stdout=io.StringIO())
