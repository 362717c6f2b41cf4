"""The structural guard of heavy reads and the per-tenant in-flight cap."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory, override_settings

from loopmem.errors import HeavyReadOverloaded
from loopmem.reads import scoped, tenant_gate
from loopmem.reads.where_guard import UnscopedHeavyRead, assert_scoped
from loopmem.redis import client
from loopmem.runtime.after_response import AfterResponseMiddleware
from memory.models import Memory
from tests.conftest import error
from tests.memory.conftest import heavy_db

TENANT = uuid.UUID("00000000-0000-0000-0000-00000000000a")
OTHER = uuid.UUID("00000000-0000-0000-0000-00000000000b")


def check(queryset, subject="s1"):
    assert_scoped(queryset.query, tenant_id=TENANT, subject_id=subject)


def test_a_scoped_query_passes():
    check(Memory.objects.filter(tenant_id=TENANT, subject_id="s1", superseded_by__isnull=True))
    check(Memory.objects.filter(tenant_id=TENANT).filter(subject_id="s1").filter(Q(project_id=None) | Q(text="x")))


def test_a_subject_less_query_raises():
    with pytest.raises(UnscopedHeavyRead, match="subject"):
        check(Memory.objects.filter(tenant_id=TENANT))


def test_another_subjects_value_raises():
    with pytest.raises(UnscopedHeavyRead, match="subject"):
        check(Memory.objects.filter(tenant_id=TENANT, subject_id="s2"))


def test_a_subject_under_or_does_not_count():
    with pytest.raises(UnscopedHeavyRead, match="subject"):
        check(Memory.objects.filter(Q(subject_id="s1") | Q(subject_id="s2"), tenant_id=TENANT))


def test_a_negated_subject_does_not_count():
    with pytest.raises(UnscopedHeavyRead, match="subject"):
        check(Memory.objects.filter(tenant_id=TENANT).exclude(subject_id="s1"))


def test_a_tenant_less_query_raises():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Memory.objects.filter(subject_id="s1"))


def test_another_tenants_value_raises():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Memory.objects.filter(tenant_id=OTHER, subject_id="s1"))


def test_a_tenant_under_or_does_not_count():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Memory.objects.filter(Q(tenant_id=TENANT) | Q(tenant_id=OTHER), subject_id="s1"))


def test_a_subquery_without_the_tenant_raises():
    pool = Memory.objects.filter(embedding__isnull=False).values("id")[:100]
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Memory.objects.filter(tenant_id=TENANT, subject_id="s1", id__in=pool))


def test_the_reference_shape_passes_a_tenant_pinned_pool_without_subject():
    pool = Memory.objects.filter(tenant_id=TENANT, embedding__isnull=False).values("id")[:100]
    check(Memory.objects.filter(tenant_id=TENANT, subject_id="s1", id__in=pool))


def test_a_join_without_the_tenant_raises():
    joined = Memory.objects.filter(tenant_id=TENANT, subject_id="s1", superseded_by__text="x")
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(joined)


def test_a_union_with_an_unscoped_query_raises():
    with pytest.raises(UnscopedHeavyRead, match="combined"):
        check(Memory.objects.filter(tenant_id=TENANT, subject_id="s1").union(Memory.objects.all()))


def test_an_unscoped_subquery_in_the_ordering_raises():
    from django.db.models import OuterRef, Subquery

    foreign = Memory.objects.filter(id=OuterRef("id")).values("text")[:1]
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Memory.objects.filter(tenant_id=TENANT, subject_id="s1").order_by(Subquery(foreign)))


@heavy_db
def test_the_session_refuses_an_unscoped_fetch_before_running_it(tenant):
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="s1") as session,
        pytest.raises(UnscopedHeavyRead),
    ):
        session.fetch(Memory.objects.filter(tenant_id=tenant.id))


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_over_the_in_flight_cap_recall_is_429(client_for, agent_key):
    response = client_for(agent_key).post("/api/v1/memory/recall", {"query": "x"}, format="json")
    assert response.status_code == 429
    assert response.json() == error(
        429,
        "heavy_read_overloaded",
        "Too many heavy reads are in flight for this tenant; retry shortly",
        {"in_flight_limit": 0},
    )


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=1)
def test_the_cap_counts_reads_in_flight_per_tenant(tenant, other_tenant):
    from loopmem.errors import HeavyReadOverloaded

    with tenant_gate.tenant_gate(tenant.id):
        with pytest.raises(HeavyReadOverloaded), tenant_gate.tenant_gate(tenant.id):
            pass
        with tenant_gate.tenant_gate(other_tenant.id):
            pass
    with tenant_gate.tenant_gate(tenant.id):  # released on exit
        pass


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_the_gate_fails_open_without_redis(tenant, tmp_path, caplog):
    with override_settings(REDIS_URL=f"unix://{tmp_path}/none.sock"), tenant_gate.tenant_gate(tenant.id):
        pass
    assert "heavy-read gate failing open" in caplog.text


# --- One slot a request (merged recall's two halves) -----------------------------------------------------------


def in_flight(tenant_id: uuid.UUID) -> int:
    from django.core.cache import cache

    return int(client.redis_client().zcard(f"{cache.key_prefix}:heavy_read:{tenant_id}"))


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=1)
def test_reads_inside_a_request_slot_share_its_one_slot(tenant):
    with tenant_gate.request_slot(tenant.id):
        assert in_flight(tenant.id) == 1
        with tenant_gate.tenant_gate(tenant.id), tenant_gate.tenant_gate(tenant.id):
            assert in_flight(tenant.id) == 1
    assert in_flight(tenant.id) == 0
    # Outside the slot the cap applies to each read again.
    with tenant_gate.tenant_gate(tenant.id), pytest.raises(HeavyReadOverloaded), tenant_gate.tenant_gate(tenant.id):
        pass


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=1)
def test_inside_a_web_request_the_slot_is_the_requests_until_its_response_is_sent(tenant):
    seen: list[int] = []

    def view(request: HttpRequest) -> HttpResponse:
        with tenant_gate.tenant_gate(tenant.id):
            pass
        seen.append(in_flight(tenant.id))  # the read is over; its slot is still the request's
        with tenant_gate.tenant_gate(tenant.id):  # a second read of the request: admitted by it, at a cap of 1
            seen.append(in_flight(tenant.id))
        return HttpResponse()

    response = AfterResponseMiddleware(view)(RequestFactory().post("/api/v1/memory/recall"))
    assert seen == [1, 1]
    assert in_flight(tenant.id) == 1  # the answer is ready; the slot goes back once it is sent
    response.close()  # what the WSGI server does once it has written the response
    assert in_flight(tenant.id) == 0
    with tenant_gate.tenant_gate(tenant.id), pytest.raises(HeavyReadOverloaded), tenant_gate.tenant_gate(tenant.id):
        pass  # the thread holds nothing any more: the cap applies to each read again


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=1)
def test_a_request_slot_admits_only_its_own_thread(tenant):
    outcome: list[str] = []

    def other_request() -> None:
        try:
            with tenant_gate.tenant_gate(tenant.id):
                outcome.append("admitted")
        except HeavyReadOverloaded:
            outcome.append("shed")

    with tenant_gate.request_slot(tenant.id):
        thread = threading.Thread(target=other_request)
        thread.start()
        thread.join()
    assert outcome == ["shed"]


@heavy_db
@override_settings(HEAVY_READ_MAX_IN_FLIGHT=0)
def test_a_refused_request_slot_leaves_each_read_to_shed_itself_and_counts_it_once(tenant):
    from prometheus_client import REGISTRY

    def shed() -> float:
        return REGISTRY.get_sample_value("loopmem_heavy_read_rejections_total") or 0.0

    before = shed()
    with tenant_gate.request_slot(tenant.id), pytest.raises(HeavyReadOverloaded), tenant_gate.tenant_gate(tenant.id):
        pass
    assert shed() - before == 1
    assert in_flight(tenant.id) == 0


@heavy_db
def test_a_slot_left_by_a_killed_process_expires(tenant, settings):
    from django.core.cache import cache

    settings.HEAVY_READ_MAX_IN_FLIGHT = 1
    ttl = settings.HEAVY_READ_STATEMENT_TIMEOUT_MS / 1000 + 5
    key = f"{cache.key_prefix}:heavy_read:{tenant.id}"
    client.redis_client().zadd(key, {"dead-process": time.time() - ttl - 1})
    with tenant_gate.tenant_gate(tenant.id):
        assert in_flight(tenant.id) == 1
