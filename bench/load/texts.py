"""The words of the load scenarios: memory texts and queries share them, so recalls find something and the
keyword lane has terms to match. No Django and no locust here: both the locust process and the wrapper import it."""

from __future__ import annotations

import random

TOPICS = ["deploy", "database", "cache", "runner", "release", "index", "queue", "backup", "token", "cluster"]
FACTS = [
    "The {t} on staging is rebuilt every night at {h}:00 UTC.",
    "Always pin the {t} version in CI; the latest one broke the build on run {n}.",
    "The {t} timeout was raised to {n} seconds after the incident.",
    "Ask before touching the production {t}; the on-call rotates on {d}.",
]
RECALL_MODES = ("semantic", "keyword", "hybrid")
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]


def fact() -> str:
    """One memory text of the scenarios' vocabulary (the wrapper fills a capacity agent's subject with these)."""
    template = random.choice(FACTS)
    return template.format(t=random.choice(TOPICS), h=random.randint(0, 23), n=random.randint(2, 999),
                           d=random.choice(DAYS))  # fmt: skip
