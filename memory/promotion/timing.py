"""`promotion_eval --timing`: what the extractive compiler costs a worker, on sessions cut from the datasets.

Run on a quiet machine: the load average is printed with the figures.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from memory.promotion.compilers import compiler_for, screen
from memory.promotion.evaluation import labelled_sessions


def compile_timing(*, turns_per_session: int = 30, sessions: int = 40, new_turns: int = 2) -> dict[str, Any]:
    """Compiler time (compile and screen, as the worker runs them) of the extractive compiler on sessions of
    `turns_per_session` turns cut from the v2 and v3 datasets' turns in order, after one warm-up compile: the
    first compile of each session, then its compile again once `new_turns` more turns have arrived."""
    pool = [turn for version in ("v2", "v3") for s in labelled_sessions(version) for turn in s.turns]
    compiler = compiler_for(None, name="extractive")
    compiler.compile(pool[-turns_per_session:])  # loads MiniLM and embeds the prototypes
    step = max(1, (len(pool) - turns_per_session - new_turns) // sessions)
    first: list[float] = []
    again: list[float] = []
    for start in range(0, step * sessions, step):
        for timings, end in ((first, start + turns_per_session), (again, start + turns_per_session + new_turns)):
            turns = pool[start:end]
            began = time.perf_counter()
            screen(compiler.compile(turns), turns=turns, scope=None)
            timings.append((time.perf_counter() - began) * 1000)
    return {
        "sessions": len(first),
        "turns_per_session": turns_per_session,
        "first_compile": _percentiles(first),
        f"after_{new_turns}_new_turns": _percentiles(again),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _percentiles(milliseconds: list[float]) -> dict[str, float]:
    ms = np.array(milliseconds)
    return {
        name: round(float(np.percentile(ms, q)), 1) for name, q in (("p50_ms", 50), ("p95_ms", 95), ("max_ms", 100))
    }
