"""The environment of loopmem's agent-side processes: the MCP server and the Claude Code Stop hook.

Both are HTTP clients of the API acting as one agent key. This package needs no Django: `python -m
agent.mcp_server` and `python -m agent.stop_hook` never load the service's settings, which start an embedded
PostgreSQL and Redis when `DATABASE_URL` / `REDIS_URL` are unset, a cost a hook that must answer in seconds, or
an MCP server talking to a remote loopmem, must never pay. The service's settings call the same reader
(setting `AGENT_INTEGRATION`) for the `manage.py mcp` / `promote_session_hook` wrappers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_URL = "http://127.0.0.1:8000"


class AgentConfigError(Exception):
    """An agent-side variable is malformed; the message names it."""


@dataclass(frozen=True)
class AgentConfig:
    """Where the API is, which agent key to use, and how long to wait for it."""

    url: str
    agent_key: str
    # Per request of the MCP tools (a recall may wait on a heavy read: up to its 10 s statement timeout).
    timeout_seconds: float
    # The whole Stop hook, payload read included: a hook must never hold up the agent.
    hook_timeout_seconds: float
    # The Stop hook's fallback when the payload carries no session id.
    session_id: str


def agent_config_from_env() -> AgentConfig:
    """Read LOOPMEM_URL, LOOPMEM_AGENT_KEY, LOOPMEM_CLIENT_TIMEOUT_SECONDS, LOOPMEM_HOOK_TIMEOUT_SECONDS and
    LOOPMEM_SESSION_ID (docs/configuration.md)."""
    return AgentConfig(
        url=os.environ.get("LOOPMEM_URL", DEFAULT_URL).strip() or DEFAULT_URL,
        agent_key=os.environ.get("LOOPMEM_AGENT_KEY", "").strip(),
        timeout_seconds=_seconds("LOOPMEM_CLIENT_TIMEOUT_SECONDS", 30.0),
        hook_timeout_seconds=_seconds("LOOPMEM_HOOK_TIMEOUT_SECONDS", 5.0),
        session_id=os.environ.get("LOOPMEM_SESSION_ID", "").strip(),
    )


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise AgentConfigError(f"{name} must be a number, got {raw!r}") from exc
