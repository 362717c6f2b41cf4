"""Erasing a subject or a tenant: nothing of it left in the database or Redis, on record, idempotent, resumable."""

from __future__ import annotations

import json
import uuid

import anyio
import pytest
from django.core.management import call_command
from mcp import Client

from agent.client import LoopmemClient
from agent.mcp_server import build_server
from knowledge.models import Article, ArticleAccessEvent
from loopmem.embedding.work_queue import Keys
from loopmem.models import DeletionAudit
from loopmem.redis.client import redis_client
from loopmem.tenancy.audit import Actor, audit_hash
from loopmem.tenancy.scope import Scope
from loopmem.tenancy.services import tenant_set_provider
from memory import recall_bump, session_tier
from memory import services as memory_services
from memory.models import Memory, PromotionJob, SessionPromotion, SessionTurn
from memory.promotion import jobs as promotion
from privacy.erasure import subject_erase, tenant_erase
from recall import history
from tests.conftest import error
from tests.factories import embedded_article
from tests.memory.conftest import embed_pending, heavy_db
from tests.privacy.conftest import database_hits, redis_hits

SUBJECT = "subject-s"
# Letters and digits: the full-text parser keeps such a word whole, so the search vector holds it verbatim too.
MARKER = "qzmark7731erase"
PEER_MARKER = "qzpeer5518keep"
NOTHING = {
    "memories": 0,
    "session_turns": 0,
    "promotion_jobs": 0,
    "promotion_watermarks": 0,
    "idempotency_records": 0,
    "access_event_queries": 0,
    "redis_keys": 0,
}
OPERATOR = Actor.operator("erase_subject")

live_db = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


def post(client, path, body, expect=(200, 201, 202)):
    response = client.post(path, body, format="json")
    assert response.status_code in expect, response.json()
    return response.json()


def subject_keys(tenant) -> list[bytes]:
    return list(redis_client().scan_iter(match=history.subject_pattern(tenant.id, SUBJECT)))


def write_the_marker_everywhere(tenant, subject, user, fake_llm, live_server, raw_key):
    """As the subject: every write path, and the reads that keep a query (ledger, recall history)."""
    tenant_set_provider(tenant=tenant, llm="openai", llm_base_url=fake_llm.url, llm_api_key="sk-test", llm_model="m")
    # Another subject's shared article, which the subject's searches will surface (and so write ledger rows).
    post(user, "/api/v1/knowledge/articles", {"title": "Bucket handbook", "body": "Where the buckets live.",
                                              "category": "reference", "status": "published"})  # fmt: skip
    remembered = post(subject, "/api/v1/memory", {"text": f"The build cache bucket is {MARKER}", "tags": [MARKER],
                                                  "metadata": {"note": MARKER}})["data"]  # fmt: skip
    for role, content in (("user", f"where is {MARKER}?"), ("fact", f"The deploy bucket is {MARKER}")):
        post(subject, "/api/v1/memory", {"tier": "session", "session_id": "s-1", "role": role, "content": content})
    post(subject, "/api/v1/knowledge/articles", {"title": f"Notes on {MARKER}", "body": f"{MARKER} is the bucket.",
                                                 "category": "finding", "status": "published"})  # fmt: skip

    async def through_mcp() -> None:
        async with Client(build_server(LoopmemClient(live_server.url, raw_key))) as client:
            result = await client.call_tool("memory_remember", {"text": f"MCP remembers {MARKER}"})
            assert not result.is_error

    anyio.run(through_mcp)

    fake_llm.reply = json.dumps([{"text": f"Promoted: the bucket is {MARKER}", "confidence": 0.9}])
    post(subject, "/api/v1/memory/promote", {"session_id": "s-1"})
    [job_id] = PromotionJob.objects.values_list("id", flat=True)
    assert promotion.promotion_run(job_id=str(job_id)).outcome == "promoted"

    embed_pending()
    post(subject, "/api/v1/memory/graduate", {"memory_id": remembered["id"]})
    post(subject, "/api/v1/recall", {"query": f"which bucket is {MARKER}", "session_id": "s-1"})
    response = subject.get("/api/v1/knowledge/search", {"q": f"bucket {MARKER}"})
    assert response.status_code == 200


@live_db
def test_after_an_erase_the_database_and_redis_hold_no_trace_of_the_subject(
    tenant, make_key, client_for, user_key, fake_llm, live_server, capsys
):
    issued = make_key("agent", tenant, agent_id=SUBJECT)
    subject, user = client_for(issued), client_for(user_key)
    peer = client_for(make_key("agent", tenant, agent_id="subject-p"))
    post(peer, "/api/v1/memory", {"text": f"The peer keeps {PEER_MARKER}"})
    write_the_marker_everywhere(tenant, subject, user, fake_llm, live_server, issued.raw_key)

    # The marker is where each path put it, and the subject has recall-history keys: the search below can fail.
    assert set(database_hits(MARKER)) == {
        "memories.text", "memories.tags", "memories.metadata", "memories.search_vector", "session_memories.content",
        "articles.title", "articles.body", "articles.search_vector", "articles.tags",
        "article_access_events.metadata",
    }  # fmt: skip
    assert subject_keys(tenant)
    assert Article.objects.filter(owner_subject_id=SUBJECT).count() == 2  # written, and graduated

    call_command("erase_subject", "--tenant", "acme", "--subject", SUBJECT, "--include-articles", "--json")
    report = json.loads(capsys.readouterr().out)

    assert database_hits(MARKER) == []
    assert redis_hits(MARKER) == []
    assert subject_keys(tenant) == []
    assert report["removed"]["memories"] == 3  # remembered, through MCP, promoted
    assert report["removed"]["session_turns"] == 2
    assert (report["removed"]["promotion_jobs"], report["removed"]["promotion_watermarks"]) == (1, 1)
    assert report["removed"]["articles"] == 2
    assert report["removed"]["access_event_queries"] >= 2  # the recall's and the search's rows
    assert report["removed"]["redis_keys"] >= 1
    assert sorted(a["graduated"] for a in report["articles"]) == [False, True]
    # The ledger rows of the other subject's article stay (the tenant's funnel), without their query.
    assert ArticleAccessEvent.objects.exists()
    assert not ArticleAccessEvent.objects.filter(metadata__has_key="query").exists()
    # What is not the subject's is untouched, and every removal is on record under the subject's keyed hash.
    assert database_hits(PEER_MARKER) == ["memories.search_vector", "memories.text"]
    assert Article.objects.filter(title="Bucket handbook").exists()
    audit = DeletionAudit.objects.filter(tenant_id=tenant.id, reason="erase_subject")
    assert audit.count() == sum(report["removed"].values()) - report["removed"]["redis_keys"]
    assert set(audit.values_list("subject_hash", flat=True)) == {audit_hash(SUBJECT)}


@heavy_db
def test_without_include_articles_the_owned_articles_are_listed_and_kept(tenant, make_key, client_for, capsys):
    subject = client_for(make_key("agent", tenant, agent_id=SUBJECT))
    post(subject, "/api/v1/memory", {"text": f"remember {MARKER}"})
    created = post(subject, "/api/v1/knowledge/articles",
                   {"title": f"About {MARKER}", "body": "Kept unless asked.", "category": "finding"})  # fmt: skip

    call_command("erase_subject", "--tenant", "acme", "--subject", SUBJECT)
    human = capsys.readouterr().out

    assert set(database_hits(MARKER)) == {"articles.title", "articles.search_vector"}
    assert (
        f"articles it owns: 1, kept (pass --include-articles to remove them)\n  {created['data']['article']['id']}"
        in (human)
    )
    assert human.startswith(
        f"erased subject {SUBJECT} of acme: 1 memories, 0 session turns, 0 promotion jobs, 0 promotion watermarks, "
        "0 idempotency records, 0 access event queries, 0 redis keys"
    )


def make_rows(tenant, subject_id=SUBJECT, memories=5, turns=3):
    scope = Scope(tenant_id=tenant.id, subject_id=subject_id)
    for n in range(memories):
        memory_services.memory_remember(scope=scope, text=f"fact {n} of {subject_id}")
    for n in range(turns):
        session_tier.session_append(scope=scope, session_id="s-1", role="user", content=f"turn {n}")


class Killed(Exception):
    """The process dying mid-erase."""


def test_an_erase_killed_after_a_batch_is_finished_by_running_it_again(tenant):
    make_rows(tenant)
    make_rows(tenant, subject_id="other")
    first = list(Memory.objects.filter(subject_id=SUBJECT).order_by("id").values_list("id", "text"))

    def die(done: int) -> None:
        raise Killed

    with pytest.raises(Killed):
        subject_erase(tenant=tenant, subject_id=SUBJECT, actor=OPERATOR, batch_size=2, progress=die)

    # The first batch is gone and on record; the rest is in place.
    assert list(Memory.objects.filter(subject_id=SUBJECT).order_by("id").values_list("id", "text")) == first[2:]
    recorded = DeletionAudit.objects.order_by("id")
    assert [(r.table_name, r.row_id, r.text_hash, r.action) for r in recorded] == [
        ("memories", str(memory_id), audit_hash(text), "delete") for memory_id, text in first[:2]
    ]

    again = subject_erase(tenant=tenant, subject_id=SUBJECT, actor=OPERATOR, batch_size=2)

    assert again.removed == {**NOTHING, "memories": 3, "session_turns": 3}
    assert not Memory.objects.filter(subject_id=SUBJECT).exists()
    assert not SessionTurn.objects.filter(subject_id=SUBJECT).exists()
    assert DeletionAudit.objects.count() == 8
    # Idempotent: once more removes and records nothing; the other subject was never touched.
    assert subject_erase(tenant=tenant, subject_id=SUBJECT, actor=OPERATOR).removed == NOTHING
    assert DeletionAudit.objects.count() == 8
    assert Memory.objects.filter(subject_id="other").count() == 5


def test_a_dry_run_counts_and_changes_nothing(tenant, capsys):
    make_rows(tenant)
    SessionPromotion.objects.create(
        tenant=tenant, subject_id=SUBJECT, session_id="s-1", session_content_hash="h", promoted_at="2026-01-01T00:00Z"
    )

    call_command("erase_subject", "--tenant", "acme", "--subject", SUBJECT, "--dry-run", "--json")

    assert json.loads(capsys.readouterr().out) == {
        "tenant_id": str(tenant.id),
        "subject_id": SUBJECT,
        "dry_run": True,
        "include_articles": False,
        "removed": {**NOTHING, "memories": 5, "session_turns": 3, "promotion_watermarks": 1},
        "articles": [],
    }
    assert Memory.objects.count() == 5
    assert not DeletionAudit.objects.exists()


def test_erase_tenant_removes_every_subject_and_leaves_other_tenants(tenant, other_tenant, capsys):
    make_rows(tenant)
    make_rows(tenant, subject_id="other")
    make_rows(other_tenant)
    embedded_article(tenant, "Kept", "Unless asked.")

    call_command("erase_tenant", "--tenant", "acme", "--json")
    report = json.loads(capsys.readouterr().out)

    assert report["removed"] == {**NOTHING, "memories": 10, "session_turns": 6}
    assert not Memory.objects.filter(tenant=tenant).exists()
    assert Memory.objects.filter(tenant=other_tenant).count() == 5
    assert Article.objects.filter(tenant=tenant).count() == 1
    report = tenant_erase(tenant=tenant, actor=Actor.operator("erase_tenant"), include_articles=True)
    assert report.removed == {**NOTHING, "articles": 1}
    assert set(DeletionAudit.objects.values_list("reason", flat=True)) == {"erase_tenant"}


def test_erase_tenant_removes_the_tenants_recall_keys_in_redis(tenant, other_tenant):
    history.mark_shown(tenant_id=tenant.id, subject_id="a", session_id="s", ids=["x"])
    history.mark_shown(tenant_id=other_tenant.id, subject_id="a", session_id="s", ids=["x"])
    redis_client().set(recall_bump.recall_bump_key(tenant.id, uuid.uuid4()), 1, ex=60)
    mine, theirs = Keys("memories", tenant.id), Keys("memories", other_tenant.id)
    redis_client().rpush(mine.pending, str(uuid.uuid4()))  # a queued embedding
    redis_client().rpush(theirs.pending, str(uuid.uuid4()))

    report = tenant_erase(tenant=tenant, actor=Actor.operator("erase_tenant"))

    assert report.removed["redis_keys"] == 3
    assert not redis_client().exists(mine.pending)
    assert redis_client().exists(theirs.pending)
    assert history.shown_ids(tenant_id=tenant.id, subject_id="a", session_id="s", ids=["x"]) == set()
    assert history.shown_ids(tenant_id=other_tenant.id, subject_id="a", session_id="s", ids=["x"]) == {"x"}


# --- the superadmin API ---------------------------------------------------------------------------------------


def test_a_superadmin_erases_a_subject_of_the_tenant_it_impersonates(tenant, superadmin_key, client_for):
    make_rows(tenant)
    admin = client_for(superadmin_key, impersonate="acme")

    response = admin.post("/api/v1/erasures", {"subject_id": SUBJECT}, format="json")

    assert response.status_code == 200
    assert response.json() == {
        "data": {
            "tenant_id": str(tenant.id),
            "subject_id": SUBJECT,
            "dry_run": False,
            "include_articles": False,
            "removed": {**NOTHING, "memories": 5, "session_turns": 3},
            "articles": [],
        }
    }
    audit = DeletionAudit.objects.all()
    assert {(a.actor_key_id, a.actor_role, a.reason) for a in audit} == {
        (superadmin_key.api_key.id, "superadmin", "POST /api/v1/erasures")
    }


def test_a_dry_run_over_the_api_changes_nothing(tenant, superadmin_key, client_for):
    make_rows(tenant)
    admin = client_for(superadmin_key, impersonate=str(tenant.id))
    body = post(admin, "/api/v1/erasures", {"subject_id": SUBJECT, "dry_run": True, "include_articles": True})
    assert body["data"]["removed"] == {**NOTHING, "memories": 5, "session_turns": 3, "articles": 0}
    assert Memory.objects.count() == 5


def test_only_superadmins_may_erase(tenant, agent, user_key, client_for):
    make_rows(tenant)
    forbidden = error(403, "forbidden", "This endpoint needs one of the roles: superadmin")
    for client in (agent, client_for(user_key)):
        response = client.post("/api/v1/erasures", {"subject_id": SUBJECT}, format="json")
        assert (response.status_code, response.json()) == (403, forbidden)
    assert Memory.objects.count() == 5


def test_a_superadmin_must_impersonate_and_name_a_subject(tenant, superadmin_key, client_for):
    bare = client_for(superadmin_key).post("/api/v1/erasures", {"subject_id": SUBJECT}, format="json")
    assert bare.json() == error(
        422,
        "impersonation_tenant_required",
        "A superadmin memory request needs an impersonation target (superadmin keys are tenant-less). "
        "Set the X-Impersonate-Tenant header so the tenant scope can be resolved.",
    )
    admin = client_for(superadmin_key, impersonate="acme")
    for body, message in (({}, "This field is required."), ({"subject_id": "  "}, "must not be blank")):
        response = admin.post("/api/v1/erasures", body, format="json")
        assert response.json() == error(422, "validation_failed", "Validation failed", {"subject_id": [message]})


def test_an_erasure_reaches_no_other_tenant(tenant, other_tenant, superadmin_key, client_for):
    make_rows(other_tenant)
    admin = client_for(superadmin_key, impersonate="acme")
    body = post(admin, "/api/v1/erasures", {"subject_id": SUBJECT})
    assert body["data"]["removed"] == NOTHING
    assert Memory.objects.filter(tenant=other_tenant).count() == 5
