"""Daily retrieval metrics (reference §4.17): the funnel, the upsert, the task and its schedule."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from celery.schedules import crontab
from django.core.management import CommandError, call_command

from config.celery import app
from knowledge import tasks
from knowledge.ledger import retrieval_metrics_compute
from knowledge.models import ArticleAccessEvent, RetrievalMetricsSnapshot
from tests.factories import ArticleFactory

pytestmark = pytest.mark.django_db

DAY = date(2026, 11, 30)
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def ledger(tenant, make_key):
    """Rows of one day: what was surfaced, opened and referenced, by two agents."""
    a, b = make_key("agent", tenant).api_key, make_key("agent", tenant).api_key
    x, y = ArticleFactory.create(tenant=tenant), ArticleFactory.create(tenant=tenant)
    search_1, search_2 = uuid.uuid4(), uuid.uuid4()

    def event(key, article, access_type, minutes, **fields):
        ArticleAccessEvent.objects.create(
            tenant=tenant,
            api_key=key,
            article=article,
            access_type=access_type,
            accessed_at=NOON + timedelta(minutes=minutes),
            **fields,
        )

    event(a, x, "search", 0, origin_search_id=search_1)
    event(a, y, "search", 0, origin_search_id=search_1)
    event(b, x, "search", 5, origin_search_id=search_2)
    event(a, x, "get", 10)  # a follows x through within the window
    event(b, y, "get", 10)  # another key, another article: not a follow-through
    event(b, x, "get", 5 + 31)  # b opens x after the 30-minute window: too late
    # Referenced twice for the same (search, article): one distinct pair; a client assertion, never a read.
    event(a, x, "referenced", 20, origin_search_id=search_1)
    event(a, x, "referenced", 21, origin_search_id=search_1)
    event(a, y, "search", -13 * 60, origin_search_id=uuid.uuid4())  # the day before
    return a, b


def test_the_funnel_of_one_day(tenant, ledger):
    snapshot = retrieval_metrics_compute(tenant_id=tenant.id, day=DAY)
    assert (snapshot.window_seconds, snapshot.searched, snapshot.followed_through) == (1800, 3, 1)
    assert snapshot.precision == pytest.approx(1 / 3)
    assert snapshot.referenced == 1
    assert snapshot.reference_rate == pytest.approx(1 / 3)
    # Referenced rows are in no read set.
    assert (snapshot.total_events, snapshot.unique_keys) == (6, 2)


def test_a_day_without_searches_has_zero_rates(tenant):
    snapshot = retrieval_metrics_compute(tenant_id=tenant.id, day=DAY)
    assert (snapshot.searched, snapshot.precision, snapshot.reference_rate) == (0, 0.0, 0.0)


def test_recomputing_upserts_one_row_per_tenant_day_and_window(tenant, ledger):
    first = retrieval_metrics_compute(tenant_id=tenant.id, day=DAY)
    ArticleAccessEvent.objects.filter(access_type="get").delete()
    second = retrieval_metrics_compute(tenant_id=tenant.id, day=DAY)
    assert second.id == first.id
    assert second.followed_through == 0
    retrieval_metrics_compute(tenant_id=tenant.id, day=DAY, window_seconds=3600)
    assert RetrievalMetricsSnapshot.objects.count() == 2


def test_the_task_snapshots_every_tenant_with_rows_that_day(tenant, other_tenant, ledger, make_key):
    assert tasks.retrieval_metrics_task(DAY.isoformat()) == 1
    assert RetrievalMetricsSnapshot.objects.get().tenant_id == tenant.id
    assert tasks.retrieval_metrics_task("2026-01-01") == 0


def test_by_default_the_task_computes_yesterday(tenant, make_key):
    key = make_key("agent", tenant).api_key
    yesterday = datetime.now(UTC) - timedelta(days=1)
    ArticleAccessEvent.objects.create(
        tenant=tenant, api_key=key, article=ArticleFactory.create(tenant=tenant), access_type="search",
        accessed_at=yesterday,
    )  # fmt: skip
    assert tasks.retrieval_metrics_task() == 1
    assert RetrievalMetricsSnapshot.objects.get().day == yesterday.date()


def test_beat_runs_it_daily_at_0430_and_sweeps_embeddings_every_five_minutes():
    schedule = app.conf.beat_schedule
    metrics = schedule["knowledge-retrieval-metrics"]
    assert metrics["task"] == "knowledge.tasks.retrieval_metrics_task"
    assert metrics["schedule"] == crontab(hour=4, minute=30)
    sweep = schedule["knowledge-embedding-sweep"]
    assert sweep["task"] == "knowledge.tasks.article_embedding_sweep_task"
    assert sweep["schedule"] == crontab(minute="2-59/5")


# --- The read path: manage.py retrieval_metrics ------------------------------------------------------------


def _metrics(*args):
    out = io.StringIO()
    call_command("retrieval_metrics", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_lists_snapshots_newest_day_first(tenant, other_tenant, ledger):
    for offset in range(3):
        retrieval_metrics_compute(tenant_id=tenant.id, day=DAY - timedelta(days=offset))
    retrieval_metrics_compute(tenant_id=other_tenant.id, day=DAY)
    body = _metrics("--tenant", tenant.slug)
    assert [row["day"] for row in body["data"]] == ["2026-11-30", "2026-11-29", "2026-11-28"]
    assert body["meta"] == {"limit": 30, "offset": 0, "total_count": 3}
    newest = body["data"][0]
    assert (newest["tenant_id"], newest["searched"], newest["followed_through"], newest["referenced"]) == (
        str(tenant.id), 3, 1, 1,
    )  # fmt: skip
    assert newest["precision"] == pytest.approx(1 / 3)
    page = _metrics("--tenant", str(tenant.id), "--limit", "1", "--offset", "1")
    assert ([row["day"] for row in page["data"]], page["meta"]["total_count"]) == (["2026-11-29"], 3)
    assert _metrics()["meta"]["total_count"] == 4  # every tenant's
    assert _metrics("--limit", "0")["meta"]["limit"] == 1  # clamped to [1, 365]
    assert _metrics("--limit", "9999")["meta"]["limit"] == 365


def test_the_command_computes_a_day_then_lists(tenant, ledger, capsys):
    body = _metrics("--compute", DAY.isoformat())
    assert body["meta"]["computed"] == 1
    assert [(row["day"], row["searched"]) for row in body["data"]] == [("2026-11-30", 3)]
    call_command("retrieval_metrics", "--tenant", tenant.slug)
    assert "2026-11-30 tenant" in capsys.readouterr().out
    with pytest.raises(CommandError, match="validation_failed"):
        call_command("retrieval_metrics", "--compute", "yesterday")
