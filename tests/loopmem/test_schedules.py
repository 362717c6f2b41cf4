"""The beat schedule comes from the interval settings, and the TTL check reads the schedule that runs."""

from __future__ import annotations

import pytest
from celery import current_app
from celery.schedules import crontab, schedule
from django.test import override_settings

from config.celery import beat_schedule
from loopmem.runtime.schedules import every, longest_gap_seconds
from memory.checks import PROMOTION_SWEEP_TASK, promotion_ttl_invariant


@pytest.mark.parametrize(
    ("seconds", "offset", "gap"),
    [(300, 2, 300), (3600, 7, 3600), (60, 0, 60), (7200, 17, 7200), (86400, 30, 86400), (5400, 0, 5400), (45, 0, 45)],
)
def test_every_interval_runs_that_often(seconds, offset, gap):
    assert longest_gap_seconds(every(seconds, offset_minutes=offset)) == gap


def test_intervals_that_divide_an_hour_keep_their_minute_offset():
    assert every(3600, offset_minutes=7) == crontab(minute="7")
    assert every(300, offset_minutes=2) == crontab(minute="2-59/5")
    assert isinstance(every(5400), schedule)
    assert not isinstance(every(5400), crontab)


def test_an_uneven_crontab_reports_its_widest_gap():
    assert longest_gap_seconds(crontab(minute=0, hour="0,1,8")) == 16 * 3600
    assert longest_gap_seconds(crontab(minute=0, hour=4, day_of_week="mon")) == 7 * 86400


def test_each_interval_setting_drives_its_beat_entry():
    with override_settings(
        EMBEDDING_SWEEP_INTERVAL_SECONDS=600,
        SESSION_PRUNE_INTERVAL_SECONDS=1800,
        PROMOTION_SWEEP_INTERVAL_SECONDS=1200,
        GRADUATION_SWEEP_INTERVAL_SECONDS=7200,
    ):
        gaps = {name: longest_gap_seconds(entry["schedule"]) for name, entry in current_app.conf.beat_schedule.items()}
        assert gaps["memory-embedding-sweep"] == 600
        assert gaps["knowledge-embedding-sweep"] == 600
        assert gaps["session-prune"] == 1800
        assert gaps["promotion-sweep"] == 1200
        assert gaps["graduation-sweep"] == 7200
    assert current_app.conf.beat_schedule == beat_schedule()  # back to the defaults


def test_the_ttl_check_reads_the_schedule_that_runs_not_the_setting():
    assert promotion_ttl_invariant(None) == []
    running = current_app.conf.beat_schedule
    # An operator's edit makes the sweep run every 2 hours while the setting still says 1 hour.
    edited = {**running, "promotion-sweep": {"task": PROMOTION_SWEEP_TASK, "schedule": crontab(minute=7, hour="*/2")}}
    current_app.conf.beat_schedule = edited
    try:
        [error] = promotion_ttl_invariant(None)
        assert error.id == "memory.E001"
        assert "interval=7200s as scheduled" in error.msg
        current_app.conf.beat_schedule = {k: v for k, v in running.items() if k != "promotion-sweep"}
        [error] = promotion_ttl_invariant(None)
        assert error.id == "memory.E002"
    finally:
        current_app.conf.beat_schedule = running
