"""The Claude Code Stop hook: promote the session that just stopped, then get out of the way.

Claude Code runs the hook command with a JSON payload on stdin (`session_id`, `transcript_path`, `cwd`,
`permission_mode`, `hook_event_name`, `stop_hook_active`, ...). The hook takes the session id from it (else
from `LOOPMEM_SESSION_ID`), calls `POST /api/v1/memory/promote` as `LOOPMEM_AGENT_KEY`, says on stderr what
happened, and always exits 0 within `LOOPMEM_HOOK_TIMEOUT_SECONDS` (5 s): a hook must never block or fail
the agent. Nothing is lost by giving up: promotion is idempotent, and the hourly sweep promotes every session
whose turns are still alive. It never decides anything for Claude Code (stdout stays empty), so
`stop_hook_active` needs no special case.

Run `python -m agent.stop_hook` (imports no Django settings, so no embedded database starts) or
`python manage.py promote_session_hook`. See docs/agents.md.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from agent.client import LoopmemAPIError, LoopmemClient, LoopmemTimeout, LoopmemUnreachable
from agent.config import AgentConfig, AgentConfigError, agent_config_from_env

# Claude Code's payloads are a few hundred bytes; anything near this is not one.
MAX_PAYLOAD_CHARS = 1_000_000
# Time kept back from the budget so the request's own timeout fires before the hook gives up on it.
_MARGIN_SECONDS = 0.25


@dataclass(frozen=True)
class HookOutcome:
    """What the hook did, in one line for stderr."""

    message: str
    # The worker was still blocked (a stdin that never closed, a server that never answered) when the budget
    # ran out: the caller must leave with os._exit, because a daemon thread holding stdin's lock can abort
    # the interpreter's shutdown with a non-zero status.
    abandoned: bool = False


def run(config: AgentConfig, *, stdin: TextIO | None) -> HookOutcome:
    """Read the payload and promote its session, within `config.hook_timeout_seconds` whatever happens."""
    budget = max(config.hook_timeout_seconds, 0.1)
    deadline = time.monotonic() + budget
    result: list[HookOutcome] = []

    def work() -> None:
        try:
            result.append(_promote(config, _read_payload(stdin), deadline))
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


def _promote(config: AgentConfig, raw_payload: str, deadline: float) -> HookOutcome:
    session_id, source, event = _session_id(raw_payload, config)
    if not session_id:
        return HookOutcome(f"skipped: no session id ({source}, and LOOPMEM_SESSION_ID is unset)")
    if not config.agent_key:
        return HookOutcome(f"skipped session {session_id}: LOOPMEM_AGENT_KEY is not set")
    wait = max(deadline - time.monotonic() - _MARGIN_SECONDS, 0.05)
    try:
        client = LoopmemClient(config.url, config.agent_key, timeout=wait)
    except ValueError as exc:
        return HookOutcome(f"skipped session {session_id}: LOOPMEM_URL: {exc}")
    try:
        client.memory_promote(session_id)
    except LoopmemTimeout:
        return HookOutcome(
            f"{config.url} did not answer within {wait:.1f}s; session {session_id} left to the hourly sweep"
        )
    except LoopmemUnreachable as exc:
        return HookOutcome(f"server down: {exc.message}; session {session_id} left to the hourly sweep")
    except LoopmemAPIError as exc:
        return HookOutcome(_refusal(exc, session_id))
    return HookOutcome(f"promotion enqueued for session {session_id} ({source}, {event})")


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


def main() -> int:
    """`python -m agent.stop_hook`: exit status 0, always."""
    try:
        config = agent_config_from_env()
    except AgentConfigError as exc:
        sys.stderr.write(f"loopmem: skipped: {exc}\n")
        return 0
    outcome = run(config, stdin=sys.stdin)
    sys.stderr.write(f"loopmem: {outcome.message}\n")
    sys.stderr.flush()
    if outcome.abandoned:
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
