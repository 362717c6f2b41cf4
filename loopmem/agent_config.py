"""The environment of loopmem's agent-side processes: the MCP server and the Claude Code Stop hook.

Both are HTTP clients of the API acting as one agent key. `config/settings/base.py` reads these variables
through `agent_config_from_env()` (setting `AGENT_INTEGRATION`), and so do the lightweight entry points
(`python -m loopmem.mcp_server`, `python -m loopmem.stop_hook`) without loading the settings module: the
settings start an embedded PostgreSQL and Redis when `DATABASE_URL` / `REDIS_URL` are unset, which a hook
that must answer in seconds, or an MCP server talking to a remote loopmem, must never pay for.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.env import env_float, env_str

DEFAULT_URL = "http://127.0.0.1:8000"


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
        url=env_str("LOOPMEM_URL", DEFAULT_URL).strip() or DEFAULT_URL,
        agent_key=env_str("LOOPMEM_AGENT_KEY").strip(),
        timeout_seconds=env_float("LOOPMEM_CLIENT_TIMEOUT_SECONDS", 30.0),
        hook_timeout_seconds=env_float("LOOPMEM_HOOK_TIMEOUT_SECONDS", 5.0),
        session_id=env_str("LOOPMEM_SESSION_ID").strip(),
    )
