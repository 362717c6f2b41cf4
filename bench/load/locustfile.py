"""The load scenario (docs/reliability.md, "Load benchmark"): concurrent agents, each with its own key and subject,
remembering, recalling (hybrid and semantic), recalling merged and appending session turns against a running
service. Run it through `manage.py loadtest` (scripts/loadtest), which creates the keys, runs locust headless and
reads the results this file writes.

No Django here, on purpose: locust monkey-patches the standard library with gevent at start-up, and this process
only speaks HTTP. Inputs come from the environment (set by the wrapper): `LOOPMEM_LOAD_KEYS` (a JSON list of raw
agent keys, one per simulated agent), `LOOPMEM_LOAD_RESULTS` (where to write the results), `LOOPMEM_LOAD_WAIT`
("min,max" think time in seconds between an agent's calls).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, events, task

_KEYS_FILE = os.environ.get("LOOPMEM_LOAD_KEYS")
KEYS: list[str] = json.loads(Path(_KEYS_FILE).read_text()) if _KEYS_FILE else []
WAIT_MIN, WAIT_MAX = (float(part) for part in os.environ.get("LOOPMEM_LOAD_WAIT", "0,1").split(","))

# Words the texts and the queries share, so recalls find something and the keyword lane has terms to match.
TOPICS = ["deploy", "database", "cache", "runner", "release", "index", "queue", "backup", "token", "cluster"]
FACTS = [
    "The {t} on staging is rebuilt every night at {h}:00 UTC.",
    "Always pin the {t} version in CI; the latest one broke the build on run {n}.",
    "The {t} timeout was raised to {n} seconds after the incident.",
    "Ask before touching the production {t}; the on-call rotates on {d}.",
]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]

_next_key = itertools.count()
_samples: dict[str, list[float]] = defaultdict(list)  # operation -> response times (ms)
_statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # operation -> status -> count
_acknowledged: dict[str, list[str]] = {"memories": [], "turns": []}  # ids of writes answered 201
_clock: dict[str, float] = {}


def _fact() -> str:
    template = random.choice(FACTS)
    return template.format(t=random.choice(TOPICS), h=random.randint(0, 23), n=random.randint(2, 999),
                           d=random.choice(DAYS))  # fmt: skip


class Agent(FastHttpUser):
    """One agent: its own key (so its own subject), one working session, a mix of reads and writes."""

    wait_time = between(WAIT_MIN, WAIT_MAX)

    def on_start(self) -> None:
        index = next(_next_key)
        if index >= len(KEYS):
            raise RuntimeError(f"more simulated agents than keys ({len(KEYS)}): run it through manage.py loadtest")
        self.headers = {"Authorization": f"Bearer {KEYS[index]}", "Content-Type": "application/json"}
        self.session_id = f"load-session-{index}"

    def _post(self, name: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        with self.client.post(path, json=body, headers=self.headers, name=name, catch_response=True) as response:
            if response.status_code in (200, 201):
                response.success()
                return response.json()  # type: ignore[no-any-return]
            response.failure(f"HTTP {response.status_code}")
            return None

    @task(3)
    def remember(self) -> None:
        answer = self._post("remember", "/api/v1/memory", {"text": _fact(), "tags": ["load"]})
        if answer is not None:
            _acknowledged["memories"].append(answer["data"]["id"])

    @task(3)
    def session_append(self) -> None:
        turn = {"tier": "session", "session_id": self.session_id, "role": random.choice(["user", "assistant"]),
                "content": _fact()}  # fmt: skip
        answer = self._post("session append", "/api/v1/memory", turn)
        if answer is not None:
            _acknowledged["turns"].append(answer["data"]["id"])

    @task(2)
    def recall_hybrid(self) -> None:
        query = f"what about the {random.choice(TOPICS)} timeout"
        self._post("recall hybrid", "/api/v1/memory/recall", {"query": query, "mode": "hybrid", "limit": 10})

    @task(2)
    def recall_semantic(self) -> None:
        query = f"when is the {random.choice(TOPICS)} rebuilt"
        self._post("recall semantic", "/api/v1/memory/recall", {"query": query, "mode": "semantic", "limit": 10})

    @task(2)
    def merged_recall(self) -> None:
        query = f"how do we handle the {random.choice(TOPICS)}"
        self._post("merged recall", "/api/v1/recall", {"query": query, "session_id": self.session_id, "limit": 10})


def _record(name: str, response_time: float, response: Any = None, **_: Any) -> None:
    status = getattr(response, "status_code", None) or 0  # 0: no HTTP answer (refused, reset, timed out)
    _samples[name].append(response_time)
    _statuses[name][str(status)] += 1


def _started(**_: Any) -> None:
    _clock["started"] = time.monotonic()


def _stopped(**_: Any) -> None:
    _clock["stopped"] = time.monotonic()


def _write_results(**_: Any) -> None:
    path = os.environ.get("LOOPMEM_LOAD_RESULTS")
    if not path:
        return
    results = {
        "seconds": _clock.get("stopped", time.monotonic()) - _clock.get("started", time.monotonic()),
        "samples_ms": _samples,
        "statuses": _statuses,
        "acknowledged": _acknowledged,
    }
    Path(path).write_text(json.dumps(results))


events.request.add_listener(_record)
events.test_start.add_listener(_started)
events.test_stop.add_listener(_stopped)
events.quitting.add_listener(_write_results)
