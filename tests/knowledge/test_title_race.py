"""Racing proposals: the unique active-title index decides, on real concurrent connections.

The documented answer: one proposal is `created`; every other proposal of that title gets 409
`duplicate_title` naming the winner, or `deduplicated` with the winner when it carried the same
idempotency key.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from knowledge import services
from knowledge.models import Article
from knowledge.services import Proposal, article_propose
from knowledge.visibility import Viewer
from loopmem.errors import DuplicateTitle
from tests.knowledge.conftest import article_of

pytestmark = pytest.mark.django_db(
    transaction=True, databases=["default", "heavy_read"], available_apps=["loopmem", "projects", "memory", "knowledge"]
)

RACERS = 6
# Unrelated bodies: the gate finds every racer novel, so only the title index can stop the losers.
BODIES = [
    "zebra stripes confuse biting flies",
    "sourdough needs a warm kitchen",
    "postgres vacuum reclaims dead tuples",
    "violins are tuned in fifths",
    "kelp forests shelter sea otters",
    "tcp retransmits after a timeout",
]


def race(viewer: Viewer, **fields: Any) -> list[Proposal | Exception]:
    """RACERS threads propose at once, each with its own body and its own connections."""
    barrier = threading.Barrier(RACERS)
    outcomes: list[Proposal | Exception] = []
    lock = threading.Lock()

    def run(body: str) -> None:
        outcome: Proposal | Exception
        try:
            barrier.wait()
            outcome = article_propose(viewer=viewer, body=body, category="finding", **fields)
        except Exception as exc:  # the outcome under test
            outcome = exc
        finally:
            connections.close_all()
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run, args=(body,)) for body in BODIES[:RACERS]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outcomes) == RACERS
    return outcomes


def test_one_racer_wins_the_title_and_the_others_get_duplicate_title(tenant):
    outcomes = race(Viewer(tenant_id=tenant.id, subject_id="curator", sees_all=True), title="Runbook")
    winners = [o for o in outcomes if isinstance(o, Proposal)]
    losers = [o for o in outcomes if isinstance(o, DuplicateTitle)]
    assert [w.verdict for w in winners] == ["created"]
    assert len(losers) == RACERS - 1, outcomes
    assert {loser.details["article_id"] for loser in losers} == {str(article_of(winners[0]).id)}
    assert Article.objects.filter(title="Runbook").count() == 1


def test_racers_with_the_same_idempotency_key_all_get_the_winner(tenant):
    outcomes = race(Viewer(tenant_id=tenant.id, subject_id="agent-a"), title="Retry", idempotency_key="req-42")
    proposals = [o for o in outcomes if isinstance(o, Proposal)]
    assert len(proposals) == RACERS, outcomes
    assert sorted(p.verdict for p in proposals) == ["created"] + ["deduplicated"] * (RACERS - 1)
    assert len({article_of(p).id for p in proposals}) == 1
    assert Article.objects.count() == 1


def test_a_racer_past_the_fast_path_is_answered_by_the_index(tenant, monkeypatch):
    # What a loser sees when the winner commits between its idempotency lookup and its insert.
    viewer = Viewer(tenant_id=tenant.id, subject_id="agent-a")
    won = article_propose(viewer=viewer, title="Retry", body=BODIES[0], category="finding", idempotency_key="req-7")
    real_lookup = services._by_idempotency_key
    lookups: list[object] = []

    def lookup(*args):
        lookups.append(args)
        return None if len(lookups) == 1 else real_lookup(*args)  # the fast path misses

    monkeypatch.setattr(services, "_by_idempotency_key", lookup)
    late = article_propose(viewer=viewer, title="Other", body=BODIES[1], category="finding", idempotency_key="req-7")
    assert (late.verdict, article_of(late).id) == ("deduplicated", article_of(won).id)
    assert len(lookups) == 2  # the fast path, then the index's answer
    with pytest.raises(DuplicateTitle) as caught:
        article_propose(viewer=viewer, title="Retry", body=BODIES[2], category="finding")
    assert caught.value.details == {"article_id": str(article_of(won).id)}
