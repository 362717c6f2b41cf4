"""Isolation as a property: a hypothesis state machine interleaves every role's writes,
corrections, forgets, recalls (semantic, keyword, hybrid, the fallback), merged recalls, session reads,
knowledge reads, promotion and graduation, through the HTTP API and the MCP tools, and after every step checks
that nothing outside the caller's scope was returned, changed or revealed (`tests/isolation/machine.py`).

Sizes, read from the environment (a test size, not a setting of the service):
- CI (the default): LOOPMEM_ISOLATION_EXAMPLES examples (default 60) of LOOPMEM_ISOLATION_STEPS steps (default 40),
  derandomized, so every CI run explores the same cases; about two minutes on two cores.
- scale (`-m scale`): LOOPMEM_ISOLATION_SCALE_EXAMPLES (default 150) of LOOPMEM_ISOLATION_SCALE_STEPS (default 60),
  seeded by `--hypothesis-seed`; at least LOOPMEM_ISOLATION_SCALE_MIN_OPERATIONS (10,000) operations, or it fails.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from config.env import env_int
from tests.isolation.machine import IsolationMachine, Tally

live_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


@pytest.fixture
def machine(live_server: Any, settings: Any) -> type[IsolationMachine]:
    # Rate limits are a different property (tests/loopmem/test_ratelimit.py); here they would only refuse steps.
    settings.RATE_LIMIT_PER_KEY_PER_MINUTE = 1_000_000
    IsolationMachine.live_server_url = live_server.url
    IsolationMachine.tally = Tally()
    IsolationMachine.mcp_servers = {}
    return IsolationMachine


def run(machine: type[IsolationMachine], *, examples: int, steps: int, derandomize: bool) -> Tally:
    profile = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(machine, settings=profile)
    return machine.tally


def report(label: str, tally: Tally, seconds: float, seed: object) -> None:
    """One line a reader can paste into docs/reliability.md: what ran, what was checked, how long, how busy."""
    load = os.getloadavg()
    sys.stdout.write(
        f"\nisolation {label}: {tally.examples} examples, {tally.steps} steps, {tally.operations} operations "
        f"({tally.mcp_calls} through MCP), {tally.checks} invariant checks, 0 leaks, {seconds:.0f} s, "
        f"seed {seed}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    for outcome, count in sorted(tally.outcomes.items()):
        sys.stdout.write(f"  {count:6d}  {outcome}\n")


@live_db
def test_no_scope_sees_changes_or_learns_of_another(machine, capsys):
    started = time.monotonic()
    tally = run(
        machine,
        examples=env_int("LOOPMEM_ISOLATION_EXAMPLES", 60),
        steps=env_int("LOOPMEM_ISOLATION_STEPS", 40),
        derandomize=True,
    )
    with capsys.disabled():
        report("ci", tally, time.monotonic() - started, "derandomized")
    assert tally.steps > 0
    assert tally.checks > tally.steps


@pytest.mark.scale
@live_db
def test_isolation_holds_over_ten_thousand_operations(machine, capsys, request):
    if "scale" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the ten-thousand-operation run is asked for with -m scale")
    started = time.monotonic()
    tally = run(
        machine,
        examples=env_int("LOOPMEM_ISOLATION_SCALE_EXAMPLES", 150),
        steps=env_int("LOOPMEM_ISOLATION_SCALE_STEPS", 60),
        derandomize=False,
    )
    with capsys.disabled():
        report("scale", tally, time.monotonic() - started, request.config.getoption("hypothesis_seed"))
    assert tally.operations >= env_int("LOOPMEM_ISOLATION_SCALE_MIN_OPERATIONS", 10_000)
