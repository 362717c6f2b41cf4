"""The load scenario (docs/reliability.md, "Load benchmark"): concurrent agents, each with its own key and subject,
remembering, recalling (hybrid and semantic), recalling merged and appending session turns against a running
service. Run it through `manage.py loadtest` (scripts/loadtest), which creates the keys, runs locust headless and
reads the results this file writes.

Two scenarios, one user class each (the wrapper names the class on locust's command line):

- `Agent` ("mixed"): remember, session append, recall hybrid and semantic, merged recall, with a think time drawn
  from `LOOPMEM_LOAD_WAIT`.
- `CapacityAgent` ("capacity"): 70 % recall (semantic, keyword and hybrid in turn), 20 % remember, 10 % session
  append, against a subject the wrapper filled beforehand. Paced by `LOOPMEM_LOAD_PACE`: `closed` (the next request
  as soon as the answer arrives: the service's capacity) or `poisson` (requests arrive at `LOOPMEM_LOAD_RATE` a
  second per agent, exponential gaps on a fixed schedule, so a late answer does not push the later arrivals back;
  an agent still has one request in flight at most, as a real agent waits for its answer).

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

from bench.load.texts import RECALL_MODES, TOPICS, fact

_KEYS_FILE = os.environ.get("LOOPMEM_LOAD_KEYS")
KEYS: list[str] = json.loads(Path(_KEYS_FILE).read_text()) if _KEYS_FILE else []
WAIT_MIN, WAIT_MAX = (float(part) for part in os.environ.get("LOOPMEM_LOAD_WAIT", "0,1").split(","))
PACE = os.environ.get("LOOPMEM_LOAD_PACE", "closed")
RATE = float(os.environ.get("LOOPMEM_LOAD_RATE", "1"))

_next_key = itertools.count()
_samples: dict[str, list[float]] = defaultdict(list)  # operation -> response times (ms)
_statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # operation -> status -> count
_acknowledged: dict[str, list[str]] = {"memories": [], "turns": []}  # ids of writes answered 201
_clock: dict[str, float] = {}


class _Caller(FastHttpUser):
    """What every simulated agent does: its own key (so its own subject), one working session, writes recorded."""

    abstract = True

    def on_start(self) -> None:
        self.index = next(_next_key)
        if self.index >= len(KEYS):
            raise RuntimeError(f"more simulated agents than keys ({len(KEYS)}): run it through manage.py loadtest")
        self.headers = {"Authorization": f"Bearer {KEYS[self.index]}", "Content-Type": "application/json"}
        self.session_id = f"load-session-{self.index}"

    def _post(self, name: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        with self.client.post(path, json=body, headers=self.headers, name=name, catch_response=True) as response:
            if response.status_code in (200, 201):
                response.success()
                return response.json()  # type: ignore[no-any-return]
            response.failure(f"HTTP {response.status_code}")
            return None

    def _remember(self) -> None:
        answer = self._post("remember", "/api/v1/memory", {"text": fact(), "tags": ["load"]})
        if answer is not None:
            _acknowledged["memories"].append(answer["data"]["id"])

    def _session_append(self) -> None:
        turn = {"tier": "session", "session_id": self.session_id, "role": random.choice(["user", "assistant"]),
                "content": fact()}  # fmt: skip
        answer = self._post("session append", "/api/v1/memory", turn)
        if answer is not None:
            _acknowledged["turns"].append(answer["data"]["id"])


class Agent(_Caller):
    """The mixed scenario: a mix of reads and writes with a think time between calls."""

    wait_time = between(WAIT_MIN, WAIT_MAX)

    @task(3)
    def remember(self) -> None:
        self._remember()

    @task(3)
    def session_append(self) -> None:
        self._session_append()

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


class CapacityAgent(_Caller):
    """The capacity scenario: 7 recalls (semantic, keyword, hybrid in turn) to 2 remembers to 1 session turn."""

    def on_start(self) -> None:
        super().on_start()
        self.modes = itertools.cycle(RECALL_MODES[self.index % 3 :] + RECALL_MODES[: self.index % 3])
        self.next_at = time.monotonic()
        if PACE == "poisson":
            # The first arrival is one gap away too: agents do not all start at once.
            time.sleep(self.wait_time())  # gevent's: locust patched it

    def wait_time(self) -> float:
        if PACE != "poisson":
            return 0.0
        self.next_at += random.expovariate(RATE)
        return max(0.0, self.next_at - time.monotonic())

    @task(7)
    def recall(self) -> None:
        mode = next(self.modes)
        query = f"what about the {random.choice(TOPICS)} timeout"
        self._post(f"recall {mode}", "/api/v1/memory/recall", {"query": query, "mode": mode, "limit": 10})

    @task(2)
    def remember(self) -> None:
        self._remember()

    @task(1)
    def session_append(self) -> None:
        self._session_append()


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
