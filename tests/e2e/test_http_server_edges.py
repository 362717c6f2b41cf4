"""What reaches the service through the real HTTP server (gunicorn with config/gunicorn.py), byte for byte:
chunked bodies read as if their length were declared, and the server's own refusals (414, 431, a malformed
header) in the API's error envelope."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.e2e.test_worker import _test_database_url, _wait_for
from tests.e2e.test_worker_killed import _free_port, stop

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `raw` as it is, read the whole answer (the server closes or the length is met)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(lines[0].split()[1]), headers, body


def request(method: str, path: str, headers: dict[str, str], body: bytes = b"", *, chunked: bool = False) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        pieces = [body[start : start + 1000] for start in range(0, len(body), 1000)]
        payload = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + payload


@pytest.fixture
def server() -> Iterator[int]:
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
         "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def healthy() -> bool:
        try:
            return exchange(port, request("GET", "/healthz", {}))[0] == 200
        except OSError:
            return False

    try:
        if not _wait_for(healthy, 60):
            pytest.fail(f"gunicorn did not come up:\n{stop(web)}")
        yield port
    finally:
        stop(web)


def envelope(body: bytes) -> dict[str, Any]:
    parsed: dict[str, dict[str, Any]] = json.loads(body)
    assert set(parsed) == {"error"}
    error = parsed["error"]
    assert set(error) == {"status", "code", "message", "details"}
    return error


def test_chunked_and_declared_bodies_get_the_same_answers(server, agent_key):
    auth = {"Authorization": f"Bearer {agent_key.raw_key}", "Content-Type": "application/json"}
    body = json.dumps({"text": "the release train leaves on thursdays " + "x" * 3000, "tags": ["t"]}).encode()
    answers = [exchange(server, request("POST", "/api/v1/memory", auth, body, chunked=way)) for way in (False, True)]
    assert [status for status, _, _ in answers] == [201, 201]
    texts = [json.loads(raw)["data"]["text"] for _, _, raw in answers]
    assert texts[0] == texts[1]
    query = json.dumps({"query": "release train", "mode": "keyword"}).encode()
    recalls = [
        exchange(server, request("POST", "/api/v1/memory/recall", auth, query, chunked=way)) for way in (False, True)
    ]
    assert [status for status, _, _ in recalls] == [200, 200]
    found = [[hit["memory"]["text"] for hit in json.loads(raw)["data"]] for _, _, raw in recalls]
    assert found[0] == found[1] == texts


def test_a_chunked_body_over_the_limit_is_413_in_the_envelope(server, agent_key):
    auth = {"Authorization": f"Bearer {agent_key.raw_key}", "Content-Type": "application/json"}
    body = json.dumps({"text": "x" * (2 * 1024 * 1024)}).encode()
    status, _, raw = exchange(server, request("POST", "/api/v1/memory", auth, body, chunked=True))
    assert (status, envelope(raw)["code"]) == (413, "payload_too_large")


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (request("GET", "/api/v1/memory?q=" + "a" * 5000, {}), 414, "uri_too_long"),
        (request("GET", "/api/v1/memory", {f"X-Header-{n}": "v" for n in range(200)}), 431, "header_fields_too_large"),
        (request("GET", "/api/v1/memory", {"Authorization": "Bearer " + "k" * 10_000}), 431, "header_fields_too_large"),
        (b"POST /api/v1/memory HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "bad_request"),
        (b"GET /api/v1/memory HTTP/1.1\r\nHost: x\r\nX-Bad: a\x00b\r\n\r\n", 400, "bad_request"),
        (
            b"POST /api/v1/memory HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            400,
            "bad_request",
        ),
        (b"POST /api/v1/memory HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "bad_request"),
        (b"POST /api/v1/memory HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\n\r\n", 501, "not_implemented"),
    ],
    ids=[
        "request line over 4094 bytes",
        "200 headers",
        "a 10 kB header",
        "Content-Length: abc",
        "NUL in a header",
        "a malformed chunk size",
        "a body not ending with chunked",
        "an unknown transfer coding",
    ],
)
def test_the_servers_own_refusals_are_in_the_envelope(server, raw, status, code):
    answered, headers, body = exchange(server, raw)
    assert answered == status, body
    assert headers["content-type"] == "application/json"
    error = envelope(body)
    assert (error["status"], error["code"], error["details"]) == (status, code, {})
    assert error["message"]
