"""A small OpenAI-compatible chat server on loopback, so tests drive the real `openai` SDK end to end.

It can answer JSON mode (`response_format={"type": "json_object"}`) the way each server the docs name does
(`json_mode`), from their documentation and error shapes, not from a recording:
- "openai": honoured; refused with a 400 when no message says "json" (OpenAI's own rule and wording);
- "ollama": honoured (Ollama's OpenAI layer maps it to its `format: "json"`);
- "vllm": honoured (guided decoding);
- "vllm-without-guided-decoding": any `response_format` refused with a 400 in vLLM's error shape
  (`{"object": "error", "message", "type": "BadRequestError", "param", "code"}`), as a server whose
  guided-decoding backend cannot serve the model does; unconstrained, its model fences the JSON in ```json.
"""

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
    headers: dict[str, str] = field(default_factory=dict)  # sent with a failure (`status` other than 200)
    delay: float = 0.0
    json_mode: str = "openai"
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
            self._send(fake.status, {"error": {"message": "fake failure", "type": "server_error"}}, fake.headers)
            return
        refusal = _json_mode_refusal(fake.json_mode, body)
        if refusal is not None:
            self._send(400, refusal)
            return
        content = fake.next_reply()
        if fake.json_mode == "vllm-without-guided-decoding":
            content = f"```json\n{content}\n```"
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
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _json_mode_refusal(server: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The 400 body a server answers to this request's `response_format`, or None when it serves it."""
    response_format = body.get("response_format")
    if response_format is None:
        return None
    if server == "vllm-without-guided-decoding":
        return {
            "object": "error",
            "message": "response_format is not supported: no guided decoding backend can serve this model",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    said_json = any("json" in str(m.get("content", "")).lower() for m in body.get("messages", []))
    if server == "openai" and response_format.get("type") == "json_object" and not said_json:
        return {
            "error": {
                "message": "'messages' must contain the word 'json' in some form, to use 'response_format' of type "
                "'json_object'.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": None,
            }
        }
    return None


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
