"""The Claude Code Stop hook: a recorded Stop payload promotes its session; nothing makes it fail or hang."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace

import pytest
from django.core.management import call_command
from django.test import override_settings

from agent.client import LoopmemClient
from agent.config import AgentConfig
from memory.models import Memory, PromotionJob
from tests.mcp.conftest import ROOT, STOP_PAYLOAD, live_db, run_hook

PAYLOAD = json.dumps(STOP_PAYLOAD)
SESSION_ID = STOP_PAYLOAD["session_id"]


def offline_env(port: int, **extra: str) -> dict[str, str]:
    """An environment whose LOOPMEM_URL points at nothing: for paths that must not reach the server."""
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LOOPMEM_URL": f"http://127.0.0.1:{port}", **extra}


@live_db
def test_a_recorded_stop_payload_enqueues_the_promotion_of_its_session(agent, tenant, tmp_path):
    run = run_hook(PAYLOAD, agent.env, cwd=tmp_path)

    assert run.returncode == 0
    assert run.stdout == ""  # stdout would be read by Claude Code; the hook decides nothing
    assert run.stderr == f"loopmem: promotion enqueued for session {SESSION_ID} (from the hook payload, Stop)\n"
    job = PromotionJob.objects.get()
    assert (job.tenant_id, job.subject_id, job.session_id) == (tenant.id, agent.subject_id, SESSION_ID)
    assert job.trigger == "explicit"
    assert not agent.data_dir.exists(), "the hook loaded the Django settings (embedded servers)"


@live_db
def test_firing_again_for_the_same_session_is_still_one_job(agent, tmp_path):
    first = run_hook(PAYLOAD, agent.env, cwd=tmp_path)
    again = run_hook(json.dumps({**STOP_PAYLOAD, "stop_hook_active": True}), agent.env, cwd=tmp_path)

    assert (first.returncode, again.returncode) == (0, 0)
    assert "promotion enqueued" in again.stderr
    assert PromotionJob.objects.filter(session_id=SESSION_ID).count() == 1


@live_db
def test_without_a_session_id_in_the_payload_it_uses_loopmem_session_id(agent, tmp_path):
    payload = {key: value for key, value in STOP_PAYLOAD.items() if key != "session_id"}
    run = run_hook(json.dumps(payload), {**agent.env, "LOOPMEM_SESSION_ID": "sess-from-env"}, cwd=tmp_path)

    assert run.returncode == 0
    assert "promotion enqueued for session sess-from-env (from LOOPMEM_SESSION_ID, Stop)" in run.stderr
    assert PromotionJob.objects.get().session_id == "sess-from-env"


@pytest.mark.parametrize(
    ("stdin", "why"),
    [
        (json.dumps({"hook_event_name": "Stop", "stop_hook_active": False}), "the hook payload has no session_id"),
        ("not json", "the hook payload is not a JSON object"),
        ("", "no hook payload on stdin"),
    ],
)
def test_without_any_session_id_it_skips_and_says_why(stdin, why, tmp_path, closed_port):
    run = run_hook(stdin, offline_env(closed_port, LOOPMEM_AGENT_KEY="lm_x"), cwd=tmp_path)

    assert run.returncode == 0
    assert run.stderr == f"loopmem: skipped: no session id ({why}, and LOOPMEM_SESSION_ID is unset)\n"


@live_db
def test_with_the_server_down_it_exits_0_at_once_and_says_so(agent, tmp_path, closed_port):
    run = run_hook(PAYLOAD, {**agent.env, "LOOPMEM_URL": f"http://127.0.0.1:{closed_port}"}, cwd=tmp_path)

    assert run.returncode == 0
    assert run.stderr.startswith(f"loopmem: server down: cannot reach loopmem at http://127.0.0.1:{closed_port}")
    assert run.stderr.endswith(f"session {SESSION_ID} left to the hourly sweep\n")
    assert not PromotionJob.objects.exists()


@live_db
def test_a_server_that_never_answers_costs_at_most_the_hook_budget(agent, tmp_path, silent_server):
    env = {**agent.env, "LOOPMEM_URL": silent_server, "LOOPMEM_HOOK_TIMEOUT_SECONDS": "1"}

    run = run_hook(PAYLOAD, env, cwd=tmp_path)

    assert run.returncode == 0
    assert f"loopmem: {silent_server} did not answer within" in run.stderr


def test_a_stdin_that_never_closes_costs_at_most_the_hook_budget(tmp_path, closed_port):
    env = offline_env(closed_port, LOOPMEM_AGENT_KEY="lm_x", LOOPMEM_HOOK_TIMEOUT_SECONDS="1")
    hook = subprocess.Popen(
        [sys.executable, "-m", "agent.stop_hook"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        text=True,
    )
    assert hook.stdin is not None
    assert hook.stdout is not None
    assert hook.stderr is not None
    try:
        returncode = hook.wait(timeout=10)  # stdin stays open: the hook must leave on its own (a hang fails here)
        stdout, stderr = hook.stdout.read(), hook.stderr.read()
    finally:
        hook.stdin.close()
        hook.kill()
        hook.stdout.close()
        hook.stderr.close()

    assert returncode == 0
    assert stdout == ""
    assert stderr.startswith("loopmem: gave up after 1s waiting for the payload or the server")


@live_db
@override_settings(PROMOTION_BUDGET_PER_HOUR=0)
def test_an_exhausted_promotion_budget_is_reported_not_raised(agent, tmp_path):
    run = run_hook(PAYLOAD, agent.env, cwd=tmp_path)

    assert run.returncode == 0
    assert run.stderr == (
        f"loopmem: skipped session {SESSION_ID}: the tenant's hourly promotion budget is spent (429 "
        "promotion_budget_exceeded); the hourly sweep will promote it while its turns live\n"
    )
    # The refusal is on record (GET /memory/promote/:session_id says budget_exceeded); nothing is in flight.
    assert PromotionJob.objects.get().status == "budget_exceeded"


@live_db
def test_a_bad_key_is_reported_with_the_apis_code(agent, tmp_path):
    run = run_hook(PAYLOAD, {**agent.env, "LOOPMEM_AGENT_KEY": "lm_not-a-real-key"}, cwd=tmp_path)

    assert run.returncode == 0
    assert run.stderr.startswith(f"loopmem: refused session {SESSION_ID}: 401 unauthorized: ")
    assert run.stderr.endswith("(check LOOPMEM_AGENT_KEY)\n")


def test_a_missing_key_skips(tmp_path, closed_port):
    run = run_hook(PAYLOAD, offline_env(closed_port), cwd=tmp_path)

    assert run.returncode == 0
    assert run.stderr == f"loopmem: skipped session {SESSION_ID}: LOOPMEM_AGENT_KEY is not set\n"


@live_db
def test_the_manage_py_command_is_the_same_hook(agent, tenant, monkeypatch):
    config = AgentConfig(url=agent.url, agent_key=agent.key, timeout_seconds=5, hook_timeout_seconds=5, session_id="")
    monkeypatch.setattr("sys.stdin", io.StringIO(PAYLOAD))
    stderr = io.StringIO()

    with override_settings(AGENT_INTEGRATION=config):
        call_command("promote_session_hook", stderr=stderr)

    assert stderr.getvalue() == f"loopmem: promotion enqueued for session {SESSION_ID} (from the hook payload, Stop)\n"
    assert PromotionJob.objects.get().session_id == SESSION_ID

    stderr = io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO(PAYLOAD))
    with override_settings(AGENT_INTEGRATION=replace(config, agent_key="")):
        call_command("promote_session_hook", stderr=stderr)
    assert "LOOPMEM_AGENT_KEY is not set" in stderr.getvalue()


# --- --wait: watch the promotion finish ------------------------------------------------------------------------


def say(agent, *contents: str) -> None:
    """Turns of the payload's session, written as the agent writes them."""
    client = LoopmemClient(agent.url, agent.key)
    for content in contents:
        client.memory_remember(tier="session", session_id=SESSION_ID, role="user", content=content)


@live_db
def test_with_wait_it_reports_how_the_promotion_ended(agent, tmp_path, promotion_worker):
    say(agent, "We deploy with `make ship`, never on Fridays.", "I prefer answers in French.")

    run = run_hook(PAYLOAD, agent.env, tmp_path, "--wait", "60")

    job = PromotionJob.objects.get()
    assert (run.returncode, run.stdout) == (0, "")
    assert run.stderr == (
        f"loopmem: promotion of session {SESSION_ID} succeeded: {job.written} written by extractive "
        f"({job.candidates} candidates, 0 quarantined, {job.gated_out} gated out, 0 deduplicated, 0 superseded)\n"
    )
    assert job.written == 2
    assert sorted(Memory.objects.values_list("text", flat=True)) == [
        "I prefer answers in French.",
        "We deploy with `make ship`, never on Fridays.",
    ]

    again = run_hook(PAYLOAD, agent.env, tmp_path, "--wait")

    assert again.stderr == (
        f"loopmem: promotion of session {SESSION_ID} skipped: unchanged since its last promotion (no compile)\n"
    )


@live_db
def test_with_wait_and_no_worker_it_says_the_promotion_is_still_pending_when_the_wait_runs_out(agent, tmp_path):
    say(agent, "We deploy with `make ship`, never on Fridays.", "I prefer answers in French.")

    run = run_hook(PAYLOAD, agent.env, tmp_path, "--wait", "1")

    assert run.returncode == 0
    assert run.stderr == (
        f"loopmem: promotion of session {SESSION_ID} still pending after waiting 1s; a worker will finish it "
        "(memory_promotion_status, or GET /api/v1/memory/promote/:session_id)\n"
    )
    assert PromotionJob.objects.get().state == "pending"


@live_db
def test_a_wait_that_is_not_a_number_promotes_without_waiting(agent, tmp_path):
    run = run_hook(PAYLOAD, agent.env, tmp_path, "--wait", "soon")

    assert run.returncode == 0
    assert run.stderr == (
        "loopmem: argument --wait: invalid float value: 'soon'; promoting without waiting\n"
        f"loopmem: promotion enqueued for session {SESSION_ID} (from the hook payload, Stop)\n"
    )


@live_db
def test_the_manage_py_command_waits_too(agent, monkeypatch):
    config = AgentConfig(url=agent.url, agent_key=agent.key, timeout_seconds=5, hook_timeout_seconds=5, session_id="")
    monkeypatch.setattr("sys.stdin", io.StringIO(PAYLOAD))
    stderr = io.StringIO()

    with override_settings(AGENT_INTEGRATION=config):
        call_command("promote_session_hook", "--wait", "0.6", stderr=stderr)

    assert stderr.getvalue().startswith(f"loopmem: promotion of session {SESSION_ID} still pending after waiting 0.6s")
