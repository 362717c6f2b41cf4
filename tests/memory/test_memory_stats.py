"""memory_stats --json (DESIGN §9): rows per tenant and subject, live vs superseded, backlog, quota, promotion."""

from __future__ import annotations

import json

from django.core.management import call_command
from django.test import override_settings

from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.promotion import jobs as promotion
from tests.factories import TenantFactory
from tests.memory.conftest import embed_pending, remember


def stats(capsys, *args):
    call_command("memory_stats", *args, "--json")
    return json.loads(capsys.readouterr().out)


@override_settings(MEMORY_QUOTA=5)
def test_stats_count_live_superseded_waiting_and_headroom_per_subject(agent, client_for, make_key, tenant, capsys):
    first = remember(agent, "old fact")
    second = remember(agent, "new fact")
    Memory.objects.filter(id=first["id"]).update(superseded_by_id=second["id"])
    embed_pending()
    remember(agent, "not embedded yet")
    other = client_for(make_key("agent", tenant, agent_id="agent-b"))
    remember(other, "b's fact")
    TenantFactory.create(slug="zzz-empty")

    out = stats(capsys)
    by_slug = {t["slug"]: t for t in out["tenants"]}
    acme = by_slug["acme"]
    assert acme["memories"] == {"live": 3, "superseded": 1, "waiting_for_embedding": 2}
    assert acme["subjects"]["count"] == 2
    assert acme["subjects"]["least_headroom"] == 3
    assert acme["subjects"]["at_quota"] == 0
    assert acme["subjects"]["top"][0] == {
        "subject_id": "agent-a", "live": 2, "superseded": 1, "waiting_for_embedding": 1, "quota_headroom": 3,
    }  # fmt: skip
    assert by_slug["zzz-empty"]["memories"] == {"live": 0, "superseded": 0, "waiting_for_embedding": 0}


def test_stats_report_session_turns_promotion_and_graduation(agent, tenant, capsys):
    for role, content in (("user", "I always reship expedited."), ("assistant", "Noted.")):
        turn = {"tier": "session", "session_id": "s-1", "role": role, "content": content}
        assert agent.post("/api/v1/memory", turn, format="json").status_code == 201
    promotion.promotion_request(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), session_id="s-1")
    hot = remember(agent, "a hot fact")
    Memory.objects.filter(id=hot["id"]).update(recall_count=5)

    [acme] = stats(capsys, "--tenant", "acme", "--top-subjects", "0")["tenants"]
    assert acme["session_turns"] == {"live": 2, "expired_not_pruned": 0}
    assert acme["promotion"]["jobs"]["pending"] == 1
    assert acme["promotion"]["budget_headroom"] == acme["promotion"]["budget_per_hour"]
    assert acme["graduation"] == {"graduated": 0, "waiting": 1, "recall_threshold": 3}
    assert acme["subjects"]["top"] == []
