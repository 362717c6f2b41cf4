"""Fixtures of the core's tests: django-ratelimit's clock, held still in the rate-limit tests (they ask for it with
`pytest.mark.usefixtures("clock")`), so no window boundary falls inside a test by chance."""

from __future__ import annotations

import django_ratelimit.core
import pytest


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    held = Clock(1_800_000_000.0)
    monkeypatch.setattr(django_ratelimit.core, "time", held)
    return held
