"""Agent-side fixtures: a live loopmem server (pytest-django's `live_server`, serving the test database from a
thread), an agent key for it, and the environment the MCP server and the Stop hook run with."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings
from mcp.types import CallToolResult, TextContent

from memory.models import PromotionJob
from memory.promotion import jobs
from memory.promotion.distiller import distill
from memory.promotion.evaluation import EvalTurn

ROOT = Path(__file__).resolve().parents[2]
STOP_PAYLOAD = json.loads((Path(__file__).parent / "claude_code_stop_payload.json").read_text())
AGENT_ID = "coder-1"

# The reference's tools (spec §2.11) plus knowledge_search, the corrections and
# memory_promotion_status.
TOOLS = {
    "memory_remember",
    "memory_recall",
    "memory_list",
    "memory_forget",
    "memory_get",
    "memory_history",
    "memory_correct",
    "memory_promote",
    "memory_promotion_status",
    "memory_graduate",
    "recall_context",
    "recall_referenced",
    "resolve_project",
    "knowledge_search",
}

# The live server is another thread with its own connections, and recall reads through `heavy_read`.
live_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


@pytest.fixture(scope="session")
def _static_url_for_live_server() -> Iterator[None]:
    # Django's live-server thread wraps the app in a static-files handler that parses STATIC_URL once, at
    # start-up. This project serves no static files and leaves it unset (None), which makes every request
    # a TypeError; any prefix that no API path starts with will do.
    with override_settings(STATIC_URL="/static/"):
        yield


@pytest.fixture(scope="session")
def live_server(_static_url_for_live_server: None, live_server: Any) -> Any:
    """pytest-django's live server, started after the setting above."""
    return live_server


@dataclass
class Agent:
    """An agent key on the live server, and the environment an agent-side process gets."""

    url: str
    key: str
    subject_id: str
    env: dict[str, str]
    # Set as LOOPMEM_DATA_DIR: a process that loaded the Django settings would create it (embedded servers).
    data_dir: Path


@pytest.fixture
def agent(live_server: Any, make_key: Any, tenant: Any, tmp_path: Path) -> Agent:
    issued = make_key("agent", tenant, agent_id=AGENT_ID)
    data_dir = tmp_path / "untouched-data-dir"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        # How docs/agents.md runs the entry points from another project's directory.
        "PYTHONPATH": str(ROOT),
        "LOOPMEM_DATA_DIR": str(data_dir),
        "LOOPMEM_URL": live_server.url,
        "LOOPMEM_AGENT_KEY": issued.raw_key,
    }
    return Agent(url=live_server.url, key=issued.raw_key, subject_id=AGENT_ID, env=env, data_dir=data_dir)


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A URL whose server accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@dataclass
class HookRun:
    returncode: int
    stdout: str
    stderr: str


def run_hook(stdin: str, env: dict[str, str], cwd: Path, *args: str) -> HookRun:
    """`python -m agent.stop_hook` as Claude Code runs it: payload on stdin, in the user's project directory."""
    done = subprocess.run(
        [sys.executable, "-m", "agent.stop_hook", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=180,  # a hang guard only: the hook's own budget (at most 5 s + a 120 s wait) is far below it
        check=False,
    )
    return HookRun(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def promotion_worker() -> Iterator[None]:
    """What the Celery worker does, on a thread of the test process: promote every pending job as it appears.

    The distiller's model is loaded first, so a job runs in milliseconds once the hook has asked for it.
    """
    distill([EvalTurn("user", "We deploy with make ship, never on Fridays.")])
    stop = threading.Event()
    crashed: list[BaseException] = []

    def work() -> None:
        try:
            while not stop.is_set():
                for job_id in PromotionJob.objects.filter(state="pending").values_list("id", flat=True):
                    jobs.promotion_run(job_id=str(job_id))
                stop.wait(0.05)
        except BaseException as exc:  # reported by the test, not lost on a thread
            crashed.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, name="promotion-worker", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)
    if crashed:
        raise crashed[0]


def text_of(result: CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text
