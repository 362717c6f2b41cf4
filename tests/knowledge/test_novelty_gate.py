"""The novelty gate (reference §4.10): every verdict, the inclusive thresholds, fail-open, the skip paths.

Similarities are made exact with integer vectors, which float32 holds exactly and pgvector sums exactly:
cos((1,0), (97,24,3,2,1,1)) = 97 / sqrt(1 * 10000) = 0.97 to the last bit, and
cos((100,1,0,0), (97,0,-24,4)) = 9700 / 10001 = 0.96990..., just below it.
"""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from knowledge.embedding import article_embed
from knowledge.models import Article
from knowledge.services import article_propose, classify
from knowledge.visibility import Viewer, viewer_for_scope
from loopmem.embedding import embedders
from loopmem.errors import DuplicateTitle, GateUnavailable, HeavyReadOverloaded
from loopmem.tenancy.scope import Scope
from tests.conftest import error
from tests.factories import ArticleFactory
from tests.knowledge.conftest import MODEL, article_of, heavy_db, propose, query_vector, vec

pytestmark = heavy_db

E0 = (1,)
AT_DUPLICATE = (97, 24, 3, 2, 1, 1)  # 0.97 from E0
AT_OVERLAP = (88, 47, 6, 3, 1, 1)  # 0.88 from E0
A = (100, 1, 0, 0)
BELOW_DUPLICATE = (97, 0, -24, 4)  # 0.969903... from A
BELOW_OVERLAP = (88, 0, -41, 24)  # 0.879912... from A


@pytest.fixture
def proposer(tenant):
    """agent-a, as the API would build its viewer."""
    return Viewer(tenant_id=tenant.id, subject_id="agent-a")


def neighbour(tenant, components, **fields):
    defaults = {"tenant": tenant, "embedding": vec(*components), "embedding_model": MODEL}
    return ArticleFactory.create(**{**defaults, **fields})


def propose_vector(viewer, components, **fields):
    fields = {"title": "Proposal", "body": "proposal body", "category": "finding", **fields}
    return article_propose(viewer=viewer, embedding=query_vector(*components), **fields)


def test_no_neighbour_is_novel_and_created(proposer):
    proposal = article_propose(viewer=proposer, title="First", body="the very first article", category="pattern")
    assert (proposal.verdict, proposal.created, proposal.score) == ("created", True, None)
    assert Article.objects.get(id=article_of(proposal).id).status == "draft"


def test_exactly_the_duplicate_threshold_is_a_duplicate_and_writes_nothing(proposer, tenant):
    existing = neighbour(tenant, AT_DUPLICATE)
    proposal = propose_vector(proposer, E0)
    assert (proposal.verdict, proposal.created, proposal.score) == ("duplicate", False, 0.97)
    assert article_of(proposal).id == existing.id
    assert Article.objects.count() == 1


def test_just_below_the_duplicate_threshold_is_gated_to_a_draft(proposer, tenant):
    existing = neighbour(tenant, BELOW_DUPLICATE)
    proposal = propose_vector(proposer, A, status="published")
    assert (proposal.verdict, proposal.created) == ("gated_to_draft", True)
    assert proposal.score == pytest.approx(9700 / 10001, abs=1e-12)
    assert proposal.score < 0.97
    article = Article.objects.get(id=article_of(proposal).id)
    assert article.status == "draft"  # whatever the caller asked for
    assert article.metadata == {
        "proposal_novelty": {
            "verdict": "low_novelty",
            "score": proposal.score,
            "nearest": [{"id": str(existing.id), "score": proposal.score}],
        }
    }


def test_exactly_the_overlap_threshold_is_low_novelty(proposer, tenant):
    neighbour(tenant, AT_OVERLAP)
    proposal = propose_vector(proposer, E0)
    assert (proposal.verdict, proposal.score) == ("gated_to_draft", 0.88)


def test_just_below_the_overlap_threshold_is_novel(proposer, tenant):
    neighbour(tenant, BELOW_OVERLAP)
    proposal = propose_vector(proposer, A, status="published")
    assert (proposal.verdict, proposal.score) == ("created", None)
    assert Article.objects.get(id=article_of(proposal).id).status == "published"


def test_the_thresholds_are_settings(proposer, tenant):
    neighbour(tenant, BELOW_OVERLAP)
    with override_settings(KNOWLEDGE_PROPOSAL_OVERLAP_THRESHOLD=0.85):
        assert propose_vector(proposer, A).verdict == "gated_to_draft"


@pytest.mark.parametrize(
    ("score", "verdict"),
    [(None, "novel"), (1.0, "duplicate"), (0.97, "duplicate"), (0.9699999999999999, "low_novelty"),
     (0.88, "low_novelty"), (0.8799999999999999, "novel"), (-0.3, "novel")],
)  # fmt: skip
def test_classification_is_inclusive_at_both_thresholds(score, verdict):
    assert classify(score) == verdict


def test_skip_on_low_novelty_writes_nothing_and_names_the_nearest(proposer, tenant):
    nearest = neighbour(tenant, BELOW_DUPLICATE)
    proposal = propose_vector(proposer, A, on_low_novelty="skip")
    assert (proposal.verdict, proposal.created, article_of(proposal).id) == ("skipped_low_novelty", False, nearest.id)
    assert Article.objects.count() == 1


def test_a_duplicate_stays_a_duplicate_when_skipping(proposer, tenant):
    existing = neighbour(tenant, AT_DUPLICATE)
    proposal = propose_vector(proposer, E0, on_low_novelty="skip")
    assert (proposal.verdict, article_of(proposal).id) == ("duplicate", existing.id)


def test_skipping_reports_a_taken_title_same_content_deduplicated_else_409(proposer, tenant):
    same = neighbour(tenant, BELOW_DUPLICATE, title="Proposal", body="proposal body")
    proposal = propose_vector(proposer, A, on_low_novelty="skip")
    assert (proposal.verdict, article_of(proposal).id) == ("deduplicated", same.id)
    Article.objects.filter(id=same.id).update(body="another body")
    with pytest.raises(DuplicateTitle) as caught:
        propose_vector(proposer, A, on_low_novelty="skip")
    assert caught.value.details == {"article_id": str(same.id)}


def test_only_articles_the_proposer_sees_are_neighbours(proposer, tenant, other_tenant):
    neighbour(tenant, E0, title="peer's", visibility="owner", owner_subject_id="agent-b")
    neighbour(tenant, E0, title="unpublished shared", status="draft")
    neighbour(other_tenant, E0, title="other tenant's")
    assert propose_vector(proposer, E0).verdict == "created"


def test_the_proposers_own_drafts_are_neighbours(proposer, tenant):
    mine = neighbour(tenant, E0, status="draft", visibility="owner", owner_subject_id="agent-a")
    assert (propose_vector(proposer, E0).verdict, propose_vector(proposer, E0).article.id) == ("duplicate", mine.id)


@pytest.mark.parametrize("status", ["archived", "superseded"])
def test_inactive_articles_are_not_neighbours(proposer, tenant, status):
    neighbour(tenant, E0, status=status)
    assert propose_vector(proposer, E0).verdict == "created"


def test_vectors_of_another_model_are_never_compared(proposer, tenant):
    neighbour(tenant, E0, embedding_model="local:all-MiniLM-L6-v2-int8")
    assert propose_vector(proposer, E0).verdict == "created"


def test_a_callers_vector_is_used_by_the_gate_only(proposer):
    proposal = propose_vector(proposer, E0)
    article = Article.objects.get(id=article_of(proposal).id)
    assert article.embedding is None  # the task embeds the article's own text
    article_embed(article_id=str(article.id))
    article.refresh_from_db()
    assert article.embedding_content_hash == embedders.content_hash("Proposal\n\nproposal body")


def test_an_embedding_failure_fails_open_and_the_article_is_embedded_later(proposer, embedding_down):
    proposal = article_propose(viewer=proposer, title="Down", body="provider down", category="finding")
    assert proposal.verdict == "created"
    assert Article.objects.get(id=article_of(proposal).id).embedding is None


def test_an_embedding_failure_with_skip_is_gate_unavailable_and_writes_nothing(proposer, embedding_down):
    with pytest.raises(GateUnavailable) as caught:
        article_propose(
            viewer=proposer, title="Down", body="provider down", category="finding", on_gate_unavailable="skip"
        )
    assert caught.value.details == {"reason": "embedding_timeout"}
    assert not Article.objects.exists()


def test_a_shed_read_is_also_unknown(proposer, monkeypatch):
    def shed(**kwargs):
        raise HeavyReadOverloaded()

    monkeypatch.setattr("knowledge.selectors.article_neighbours", shed)
    with pytest.raises(GateUnavailable) as caught:
        propose_vector(proposer, E0, on_gate_unavailable="skip")
    assert caught.value.details == {"reason": "heavy_read_overloaded"}


def test_over_http_gate_unavailable_is_503(agent, embedding_down):
    response = propose(agent, on_gate_unavailable="skip")
    assert response.status_code == 503
    assert response.json() == error(
        503, "gate_unavailable", GateUnavailable.default_message, {"reason": "embedding_timeout"}
    )


ROTATION = "Rotate the signing keys every quarter and keep the previous key valid for one week so tokens still verify"


def test_over_http_a_duplicate_is_200_with_the_existing_article(user):
    # With the test's hashing embedder these two texts are 0.98 similar.
    first = propose(user, title="Key rotation", body=ROTATION, expect=201)
    again = propose(user, title="Signing key rotation", body=ROTATION, expect=200)
    data = again.json()["data"]
    assert (data["verdict"], data["created"]) == ("duplicate", False)
    assert data["article"]["id"] == first.json()["data"]["article"]["id"]


def test_over_http_skipped_low_novelty_is_200_and_gated_to_draft_201(user):
    # 0.91 similar: low novelty.
    first = propose(user, title="Rotate keys", body=ROTATION, expect=201).json()["data"]["article"]
    skipped = propose(user, title="Key rotation policy", body=ROTATION, on_low_novelty="skip", expect=200)
    assert skipped.json()["data"] == {"verdict": "skipped_low_novelty", "created": False, "article": first}
    gated = propose(user, title="Key rotation policy", body=ROTATION, status="published", expect=201)
    assert (gated.json()["data"]["verdict"], gated.json()["data"]["article"]["status"]) == ("gated_to_draft", "draft")


def test_graduation_calls_it_with_an_owner_visible_published_article(tenant):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    proposal = article_propose(
        viewer=viewer_for_scope(scope),
        title="Prefer retries with jitter (memory 1234)",
        body="Prefer retries with jitter.",
        category="finding",
        status="published",
        visibility="owner",
        owner_subject_id=scope.subject_id,
        idempotency_key="memory-graduation-1234-global",
        on_low_novelty="skip",
        on_gate_unavailable="skip",
        tags=["Retry", "idem-design"],
    )
    article = article_of(proposal)
    assert (proposal.verdict, article.visibility, article.owner_subject_id, article.tags) == (
        "created",
        "owner",
        "agent-a",
        ["retry"],
    )
    again = article_propose(
        viewer=viewer_for_scope(scope),
        title="anything",
        body="anything",
        category="finding",
        owner_subject_id=scope.subject_id,
        idempotency_key="memory-graduation-1234-global",
    )
    assert (again.verdict, article_of(again).id) == ("deduplicated", article.id)


@pytest.mark.parametrize(("on_low_novelty", "verdict"), [("draft", "created"), ("skip", "skipped_low_novelty")])
def test_a_duplicate_that_vanished_since_the_read_is_created_or_skipped(proposer, monkeypatch, on_low_novelty, verdict):
    from knowledge.selectors import Neighbour

    ghost = Neighbour(article_id=uuid.uuid4(), similarity=0.99)
    monkeypatch.setattr("knowledge.selectors.article_neighbours", lambda **kwargs: [ghost])
    proposal = propose_vector(proposer, E0, on_low_novelty=on_low_novelty)
    assert (proposal.verdict, proposal.score) == (verdict, 0.99)
    assert Article.objects.count() == (1 if verdict == "created" else 0)
