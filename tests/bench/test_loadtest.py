"""manage.py loadtest: a tiny run end to end (locust against a real gunicorn on the test database), and the
lost-write check that closes every run (figures are for humans; only their presence and the counts are asserted)."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from bench.harness import live_server
from bench.load_report import errors_by_status, lost_write_check, operation_table, server_errors
from loopmem.models import ApiKey
from memory.models import Memory, SessionTurn
from tests.e2e.test_worker import _test_database_url

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "heavy_read"],
    available_apps=["loopmem", "projects", "memory", "knowledge", "bench"],
)
OPERATIONS = {"remember", "session append", "recall hybrid", "recall semantic", "merged recall"}
CAPACITY_OPERATIONS = {"remember", "session append", "recall hybrid", "recall semantic", "recall keyword"}


def test_a_short_run_reports_its_operations_and_finds_every_acknowledged_write(settings):
    settings.DATABASE_URL = settings.HEAVY_READ_DATABASE_URL = _test_database_url()  # the server writes where we read
    out = io.StringIO()
    with live_server(workers=1) as url:
        call_command("loadtest", "--host", url, "--users", "2", "--run-time", "3", "--think", "0,0.2", "--json",
                     stdout=out)  # fmt: skip
    summary = json.loads(out.getvalue())
    assert set(summary["operations"]) - {"all"} <= OPERATIONS
    assert summary["operations"]["all"]["requests"] > 0
    assert summary["server_errors"] == 0
    assert summary["acknowledged"] > 0
    assert (summary["present"], summary["lost"]) == (summary["acknowledged"], 0)
    assert len(summary["load_average_before"]) == len(summary["load_average_after"]) == 3
    # Where the CPU went: the web server and the load generator both run on this machine.
    assert summary["cpu_seconds"]["web"] > 0
    assert summary["cpu_seconds"]["load generator"] > 0
    assert summary["cpu_ms_per_request"]["all"] > 0
    # The run's agent keys lived only as long as the run.
    assert ApiKey.objects.filter(agent_id__startswith="load-").count() == 2
    assert not ApiKey.objects.filter(agent_id__startswith="load-", revoked_at__isnull=True).exists()


def test_capacity_levels_fill_each_agents_subject_and_report_every_level(settings):
    settings.DATABASE_URL = settings.HEAVY_READ_DATABASE_URL = _test_database_url()
    out = io.StringIO()
    with live_server(workers=1) as url:
        call_command("loadtest", "--host", url, "--scenario", "capacity", "--pace", "poisson", "--rate", "5",
                     "--users", "1,2", "--run-time", "3", "--memories", "3", "--json", stdout=out)  # fmt: skip
    levels = json.loads(out.getvalue())["levels"]
    assert [level["users"] for level in levels] == [1, 2]
    for level in levels:
        assert level["pacing"] == "poisson, 5 req/s per agent"
        assert set(level["operations"]) - {"all"} <= CAPACITY_OPERATIONS
        assert level["operations"]["all"]["requests"] > 0
        assert (level["server_errors"], level["lost"]) == (0, 0)
    # Every agent's subject was filled, and embedded, before its level ran.
    filled = Memory.objects.filter(tags__contains=["load-fill"])
    assert filled.values("subject_id").distinct().count() == 3
    assert filled.count() == 9
    assert not filled.filter(embedding__isnull=True).exists()


@pytest.mark.parametrize("levels", ["0", "8,0", "eight", ""])
def test_a_level_without_agents_is_refused(levels):
    with pytest.raises(CommandError, match="--users"):
        call_command("loadtest", "--users", levels)


def test_the_check_counts_a_missing_or_foreign_write_as_lost(tenant, other_tenant):
    mine = Memory.objects.create(tenant=tenant, subject_id="load-1", text="kept")
    foreign = Memory.objects.create(tenant=other_tenant, subject_id="load-1", text="elsewhere")  # not the run's tenant
    turn = SessionTurn.objects.create(tenant=tenant, subject_id="load-1", session_id="s", role="user", content="hi",
                                      expires_at=timezone.now() + timedelta(hours=2))  # fmt: skip
    acknowledged = {"memories": [str(mine.id), str(foreign.id), str(uuid.uuid4())], "turns": [str(turn.id)]}
    check = lost_write_check(tenant=tenant, acknowledged=acknowledged)
    assert (check.acknowledged, check.present, check.lost) == (
        {"memories": 3, "turns": 1},
        {"memories": 1, "turns": 1},
        2,
    )
    assert check.line().startswith("acknowledged 4, present 2, lost 2")


def test_the_figures_keep_server_errors_apart_from_refusals():
    results = {
        "seconds": 2.0,
        "samples_ms": {"remember": [10.0, 20.0, 30.0, 40.0], "recall hybrid": [5.0, 7.0]},
        "statuses": {"remember": {"201": 2, "503": 1, "0": 1}, "recall hybrid": {"200": 1, "429": 1}},
    }
    table = operation_table(results)
    assert (table["remember"]["requests"], table["remember"]["errors"], table["remember"]["per_second"]) == (4, 2, 2.0)
    assert (table["all"]["requests"], table["all"]["errors"], table["all"]["per_second"]) == (6, 3, 3.0)
    by_status = errors_by_status(results)
    assert by_status == {"0": 1, "429": 1, "503": 1}
    assert server_errors(by_status) == 1
