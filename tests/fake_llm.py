"""A small OpenAI-compatible chat server on loopback, so tests drive the real `openai` SDK end to end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class FakeLLM:
    """What the server answers (`replies` in order, then `reply`), and what it was asked."""

    url: str = ""
    reply: str = "[]"
    replies: list[str] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)

    def next_reply(self) -> str:
        return self.replies.pop(0) if self.replies else self.reply

    @property
    def user_messages(self) -> list[str]:
        return [m["content"] for r in self.requests for m in r["messages"] if m["role"] == "user"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        fake.requests.append({**body, "path": self.path, "authorization": self.headers.get("authorization")})
        if fake.delay:
            time.sleep(fake.delay)
        if fake.status != 200:
            self._send(fake.status, {"error": {"message": "fake failure", "type": "server_error"}})
            return
        self._send(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": fake.next_reply()},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeLLM) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    server = _Server(fake)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
