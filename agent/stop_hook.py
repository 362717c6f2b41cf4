"""The Claude Code Stop hook: promote the session that just stopped, then get out of the way.

Claude Code runs the hook command with a JSON payload on stdin (`session_id`, `transcript_path`, `cwd`,
`permission_mode`, `hook_event_name`, `stop_hook_active`, ...). The hook takes the session id from it (else
from `LOOPMEM_SESSION_ID`), calls `POST /api/v1/memory/promote` as `LOOPMEM_AGENT_KEY`, says on stderr what
happened, and always exits 0 within `LOOPMEM_HOOK_TIMEOUT_SECONDS` (5 s): a hook must never block or fail
the agent. Nothing is lost by giving up: promotion is idempotent, and the hourly sweep promotes every session
whose turns are still alive. It never decides anything for Claude Code (stdout stays empty), so
`stop_hook_active` needs no special case.

With `--wait [SECONDS]` (default 30, at most 120) it then watches the promotion's job and reports how it
ended (`succeeded` with its counts, `skipped_unchanged`, `failed`, `budget_exceeded`), or that it was still
pending or running when the wait ran out; the wait is added to the hook's budget, and never exceeded.

Run `python -m agent.stop_hook [--wait [SECONDS]]` (imports no Django settings, so no embedded database starts)
or `python manage.py promote_session_hook [--wait [SECONDS]]`. See docs/agents.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from agent.client import JSONObject, LoopmemAPIError, LoopmemClient, LoopmemError, LoopmemTimeout, LoopmemUnreachable
from agent.config import AgentConfig, AgentConfigError, agent_config_from_env

# Claude Code's payloads are a few hundred bytes; anything near this is not one.
MAX_PAYLOAD_CHARS = 1_000_000
# Time kept back from the budget so the request's own timeout fires before the hook gives up on it.
_MARGIN_SECONDS = 0.25
DEFAULT_WAIT_SECONDS = 30.0
MAX_WAIT_SECONDS = 120.0


@dataclass(frozen=True)
class HookOutcome:
    """What the hook did, in one line for stderr."""

    message: str
    # The worker was still blocked (a stdin that never closed, a server that never answered) when the budget
    # ran out: the caller must leave with os._exit, because a daemon thread holding stdin's lock can abort
    # the interpreter's shutdown with a non-zero status.
    abandoned: bool = False


def run(config: AgentConfig, *, stdin: TextIO | None, wait_seconds: float = 0.0) -> HookOutcome:
    """Read the payload and promote its session, within `config.hook_timeout_seconds` (plus `wait_seconds`, to
    watch the promotion finish) whatever happens."""
    wait = min(max(wait_seconds, 0.0), MAX_WAIT_SECONDS)
    budget = max(config.hook_timeout_seconds, 0.1) + wait
    deadline = time.monotonic() + budget
    result: list[HookOutcome] = []

    def work() -> None:
        try:
            result.append(_promote(config, _read_payload(stdin), deadline, wait_seconds=wait))
        except Exception as exc:
            # Not swallowed: reported on stderr. The hook's contract is exit 0 with a reason, whatever broke.
            result.append(HookOutcome(f"hook error: {type(exc).__name__}: {exc}"))

    worker = threading.Thread(target=work, name="loopmem-stop-hook", daemon=True)
    worker.start()
    worker.join(budget)
    if result:
        return result[0]
    return HookOutcome(
        f"gave up after {budget:g}s waiting for the payload or the server (LOOPMEM_HOOK_TIMEOUT_SECONDS); "
        "the hourly sweep will promote the session",
        abandoned=True,
    )


def _read_payload(stdin: TextIO | None) -> str:
    if stdin is None or stdin.closed or stdin.isatty():  # run by hand: there is no payload
        return ""
    return stdin.read(MAX_PAYLOAD_CHARS)


def _promote(config: AgentConfig, raw_payload: str, deadline: float, *, wait_seconds: float) -> HookOutcome:
    session_id, source, event = _session_id(raw_payload, config)
    if not session_id:
        return HookOutcome(f"skipped: no session id ({source}, and LOOPMEM_SESSION_ID is unset)")
    if not config.agent_key:
        return HookOutcome(f"skipped session {session_id}: LOOPMEM_AGENT_KEY is not set")
    # The request gets what is left of the hook's own budget; a --wait is for watching, not for a slow POST.
    left = deadline - time.monotonic() - wait_seconds
    request_timeout = max(min(left, config.hook_timeout_seconds) - _MARGIN_SECONDS, 0.05)
    try:
        client = LoopmemClient(config.url, config.agent_key, timeout=request_timeout)
    except ValueError as exc:
        return HookOutcome(f"skipped session {session_id}: LOOPMEM_URL: {exc}")
    try:
        client.memory_promote(session_id)
    except LoopmemTimeout:
        return HookOutcome(
            f"{config.url} did not answer within {request_timeout:.1f}s; session {session_id} left to the hourly sweep"
        )
    except LoopmemUnreachable as exc:
        return HookOutcome(f"server down: {exc.message}; session {session_id} left to the hourly sweep")
    except LoopmemAPIError as exc:
        return HookOutcome(_refusal(exc, session_id))
    enqueued = f"promotion enqueued for session {session_id} ({source}, {event})"
    if not wait_seconds:
        return HookOutcome(enqueued)
    try:
        job = client.wait_for_promotion(session_id, timeout=deadline - time.monotonic() - _MARGIN_SECONDS)
    except LoopmemError as exc:
        return HookOutcome(f"{enqueued}; its status could not be read: {exc.code}: {exc.message}")
    return HookOutcome(_job_line(session_id, job, wait_seconds))


def _job_line(session_id: str, body: JSONObject, wait: float) -> str:
    """How the promotion ended (or that it has not yet), in one line."""
    data: dict[str, Any] = body.get("data") or {}
    status, outcome, compiler = data.get("status"), data.get("outcome"), data.get("compiler")
    counts: dict[str, Any] = data.get("counts") or {}
    if status == "succeeded":
        note = "" if outcome in (None, "promoted") else f" ({outcome})"
        return (
            f"promotion of session {session_id} succeeded{note}: {counts.get('written')} written by {compiler} "
            f"({counts.get('candidates')} candidates, {counts.get('quarantined')} quarantined, "
            f"{counts.get('gated_out')} gated out, "
            f"{counts.get('deduplicated')} deduplicated, {counts.get('superseded')} superseded)"
        )
    if status == "skipped_unchanged":
        return f"promotion of session {session_id} skipped: unchanged since its last promotion (no compile)"
    if status == "failed":
        return f"promotion of session {session_id} failed ({outcome}); {counts.get('written')} written"
    if status == "budget_exceeded":
        return (
            f"promotion of session {session_id} not run: the tenant's hourly promotion budget is spent "
            "(budget_exceeded); the hourly sweep will promote it while its turns live"
        )
    return (
        f"promotion of session {session_id} still {status} after waiting {wait:g}s; a worker will finish it "
        "(memory_promotion_status, or GET /api/v1/memory/promote/:session_id)"
    )


def _session_id(raw_payload: str, config: AgentConfig) -> tuple[str, str, str]:
    """(session id, where it came from, hook event name)."""
    payload: object = None
    if raw_payload.strip():
        try:
            payload = json.loads(raw_payload)
        except ValueError:
            payload = None
    if not isinstance(payload, dict):
        source = "no hook payload on stdin" if not raw_payload.strip() else "the hook payload is not a JSON object"
        return config.session_id, "from LOOPMEM_SESSION_ID" if config.session_id else source, "no event"
    event = payload.get("hook_event_name")
    event_name = event if isinstance(event, str) and event else "unnamed event"
    session_id = payload.get("session_id")
    if isinstance(session_id, str) and session_id.strip():
        return session_id.strip(), "from the hook payload", event_name
    if config.session_id:
        return config.session_id, "from LOOPMEM_SESSION_ID", event_name
    return "", "the hook payload has no session_id", event_name


def _refusal(exc: LoopmemAPIError, session_id: str) -> str:
    if exc.code == "promotion_budget_exceeded":
        return (
            f"skipped session {session_id}: the tenant's hourly promotion budget is spent (429 "
            "promotion_budget_exceeded); the hourly sweep will promote it while its turns live"
        )
    if exc.status == 429:
        retry = f", retry in {exc.retry_after:g}s" if exc.retry_after is not None else ""
        return f"skipped session {session_id}: rate limited (429 {exc.code}{retry})"
    hint = " (check LOOPMEM_AGENT_KEY)" if exc.status == 401 else ""
    return f"refused session {session_id}: {exc.status} {exc.code}: {exc.message}{hint}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by `python -m agent.stop_hook` and `manage.py promote_session_hook`."""
    parser.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=DEFAULT_WAIT_SECONDS,
        default=0.0,
        metavar="SECONDS",
        help=f"watch the promotion finish and report it (default {DEFAULT_WAIT_SECONDS:g} s, at most "
        f"{MAX_WAIT_SECONDS:g} s; added to LOOPMEM_HOOK_TIMEOUT_SECONDS)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m agent.stop_hook [--wait [SECONDS]]`: exit status 0, always (a bad option included)."""
    parser = argparse.ArgumentParser(
        prog="python -m agent.stop_hook", description=__doc__.split("\n")[0], exit_on_error=False
    )
    add_arguments(parser)
    wait = 0.0
    try:
        options, unknown = parser.parse_known_args(argv)
        wait = options.wait
    except argparse.ArgumentError as exc:
        unknown = []
        sys.stderr.write(f"loopmem: {exc}; promoting without waiting\n")
    if unknown:
        sys.stderr.write(f"loopmem: ignoring unknown arguments: {' '.join(unknown)}\n")
    try:
        config = agent_config_from_env()
    except AgentConfigError as exc:
        sys.stderr.write(f"loopmem: skipped: {exc}\n")
        return 0
    outcome = run(config, stdin=sys.stdin, wait_seconds=wait)
    sys.stderr.write(f"loopmem: {outcome.message}\n")
    sys.stderr.flush()
    if outcome.abandoned:
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
