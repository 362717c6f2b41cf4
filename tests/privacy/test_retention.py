"""Retention, at a fixed `now`: ledger rows and finished promotion jobs past their days go, query texts sooner."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from knowledge.models import ArticleAccessEvent
from memory.models import PromotionJob
from privacy import tasks
from privacy.retention import RetentionReport, retention_prune
from tests.factories import ArticleFactory

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


@pytest.fixture
def ledger(tenant, other_tenant, agent_key, make_key):
    """Access events at known ages, in two tenants; each holds its query."""
    events = {}
    for owner, key in ((tenant, agent_key), (other_tenant, make_key("agent", other_tenant))):
        article = ArticleFactory.create(tenant=owner)
        for age in (1, 6.9, 7.1, 89, 91, 400):
            events[(owner.slug, age)] = ArticleAccessEvent.objects.create(
                tenant=owner,
                article=article,
                api_key=key.api_key,
                access_type="search",
                accessed_at=days_ago(age),
                metadata={"query": f"where is the runbook ({age})", "rank": 1},
            )
    return events


def job(tenant, state, finished_days_ago, session):
    finished = days_ago(finished_days_ago) if finished_days_ago is not None else None
    return PromotionJob.objects.create(
        tenant=tenant, subject_id="a", session_id=session, trigger="sweep", state=state, finished_at=finished
    )


def test_the_prune_deletes_old_rows_blanks_old_queries_and_keeps_the_rest(tenant, ledger):
    jobs = {
        "recent": job(tenant, "done", 10, "s-1"),
        "old": job(tenant, "done", 91, "s-2"),
        "old_failed": job(tenant, "failed", 200, "s-3"),
        "in_flight": job(tenant, "pending", None, "s-4"),
    }
    PromotionJob.objects.filter(id=jobs["in_flight"].id).update(inserted_at=days_ago(300))

    report = retention_prune(now=NOW, batch_size=2)  # small batches: the loop runs more than once

    assert report == RetentionReport(access_events_deleted=4, queries_blanked=4, promotion_jobs_deleted=2)
    kept = ArticleAccessEvent.objects.in_bulk([event.id for event in ledger.values()])
    for (slug, age), event in ledger.items():
        if age > 90:
            assert event.id not in kept, (slug, age)
        elif age > 7:
            assert kept[event.id].metadata == {"rank": 1}, (slug, age)  # the row stays, its query does not
        else:
            assert kept[event.id].metadata == event.metadata, (slug, age)
    assert set(PromotionJob.objects.values_list("session_id", flat=True)) == {"s-1", "s-4"}

    assert retention_prune(now=NOW) == RetentionReport()  # nothing left to do


@override_settings(RETENTION_DAYS=30, QUERY_TEXT_RETENTION_DAYS=1)
def test_the_settings_decide_the_cutoffs(ledger):
    report = retention_prune(now=NOW)
    # Over 30 days: 89, 91 and 400 days old, in each tenant; then over a day: 6.9 and 7.1 (exactly a day is kept).
    assert report == RetentionReport(access_events_deleted=6, queries_blanked=4, promotion_jobs_deleted=0)
    assert ArticleAccessEvent.objects.filter(metadata__has_key="query").count() == 2


@pytest.mark.parametrize("runner", ["task", "command"])
def test_the_hourly_task_and_the_command_prune_at_the_current_time(tenant, agent_key, runner, capsys):
    # They take no `now`: rows far on either side of the cutoffs, so the outcome cannot depend on the clock.
    article = ArticleFactory.create(tenant=tenant)
    now = timezone.now()
    for age in (1 / 24, 30, 200):
        ArticleAccessEvent.objects.create(
            tenant=tenant, article=article, api_key=agent_key.api_key, access_type="search",
            accessed_at=now - timedelta(days=age), metadata={"query": "q"},
        )  # fmt: skip

    if runner == "task":
        summary = tasks.retention_prune_task()
    else:
        call_command("retention_prune", "--json")
        summary = json.loads(capsys.readouterr().out)

    assert summary == {
        "access_events_deleted": 1,
        "queries_blanked": 1,
        "promotion_jobs_deleted": 0,
        "idempotency_records_deleted": 0,
    }
