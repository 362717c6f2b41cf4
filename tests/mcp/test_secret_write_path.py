"""The MCP write path against the whole secret corpus: `memory_remember` through the MCP server to a live loopmem.

The MCP server is a client of the HTTP API, so the refusal is the API's: the tool result is an error carrying the
API's 422 `secret_detected` envelope. Every secret and every look-alike goes through, as on the HTTP paths
(`tests/privacy/test_secret_write_paths.py`), each after a short lead-in: the `mcp` SDK parses a string argument
that is itself valid JSON (the service-account key case is a JSON object) into an object before the tool runs,
and refuses it as "not a string" without ever calling loopmem.
"""

from __future__ import annotations

import json

import anyio
import pytest
from django.test import override_settings
from mcp import Client

from agent import client as api
from agent.client import LoopmemClient
from agent.mcp_server import build_server
from loopmem.secret_guard.scan import scan
from memory.models import Memory
from tests.mcp.conftest import Agent, live_db, text_of
from tests.secret_corpus import BENIGN, SECRET_DETECTED_MESSAGE, WRITE_SECRETS, PathFigures, refused_over_its_span

LEAD = "Remember: "


@live_db
@override_settings(MEMORY_QUOTA=1000)
def test_the_remember_tool_refuses_every_secret_and_stores_every_look_alike(agent: Agent, recording_embedder):
    server = build_server(LoopmemClient(agent.url, agent.key))
    texts = [LEAD + case.text for case in WRITE_SECRETS] + [LEAD + text for _, text in BENIGN]

    async def scenario() -> list[tuple[bool, str]]:
        async with Client(server) as client:
            results = []
            for text in texts:
                result = await client.call_tool("memory_remember", {"text": text})
                results.append((result.is_error, text_of(result)))
            return results

    results = anyio.run(scenario)

    figures = PathFigures("MCP memory_remember (live server)")
    for case, (is_error, text) in zip(WRITE_SECRETS, results, strict=False):
        body = json.loads(text)
        if not is_error or not refused_over_its_span(body["error"].get("details", {}), "text", case, len(LEAD)):
            figures.false_negatives.append(case.id)
            continue
        findings = scan(LEAD + case.text)
        assert body == {
            "error": {
                "status": 422,
                "code": "secret_detected",
                "message": SECRET_DETECTED_MESSAGE,
                "details": {
                    "kinds": sorted({f.kind for f in findings}),
                    "spans": {"text": [[f.start, f.end] for f in findings]},
                },
            }
        }
        assert case.secret not in text
    for (name, _), (is_error, text) in zip(BENIGN, results[len(WRITE_SECRETS) :], strict=True):
        if is_error:
            assert json.loads(text)["error"]["code"] == "secret_detected", text
            figures.false_positives.append(name)
        else:
            assert set(json.loads(text)) == {"data"}
    figures.check()

    stored = list(Memory.objects.values_list("text", flat=True))
    assert sorted(stored) == sorted(LEAD + text for name, text in BENIGN if name not in figures.false_positives)
    assert recording_embedder.texts == []  # nothing embedded yet (no worker), let alone a secret


@live_db
def test_the_typed_client_raises_secret_detected_with_its_details(agent: Agent):
    [case] = [c for c in WRITE_SECRETS if c.id == "aws_key_id"]
    with pytest.raises(api.SecretDetected) as refused:
        LoopmemClient(agent.url, agent.key).memory_remember(text=case.text)

    findings = scan(case.text)
    assert refused.value.envelope() == {
        "error": {
            "status": 422,
            "code": "secret_detected",
            "message": SECRET_DETECTED_MESSAGE,
            "details": {"kinds": ["aws_access_key"], "spans": {"text": [[f.start, f.end] for f in findings]}},
        }
    }
