"""Beat schedules from interval settings, and the longest gap a schedule leaves (what the TTL check needs)."""

from __future__ import annotations

import itertools
from datetime import timedelta

from celery.schedules import crontab, schedule

_DAY_MINUTES = 24 * 60


def every(seconds: int, *, offset_minutes: int = 0) -> schedule:
    """Run every `seconds`. An interval that divides an hour or a day becomes a crontab at `offset_minutes`
    past (so periodic passes keep apart and keep their wall-clock slots across beat restarts); any other
    interval is a plain interval schedule."""
    if seconds <= 0:
        raise ValueError(f"an interval must be positive, got {seconds}")
    if seconds % 60 == 0 and 3600 % seconds == 0:
        step = seconds // 60
        minute = str(offset_minutes % 60) if step == 60 else f"{offset_minutes % step}-59/{step}"
        return crontab(minute=minute)
    if seconds % 3600 == 0 and 86400 % seconds == 0:
        hours = seconds // 3600
        return crontab(minute=offset_minutes % 60, hour="0" if hours == 24 else f"*/{hours}")
    return schedule(run_every=timedelta(seconds=seconds))


def longest_gap_seconds(entry: schedule) -> float:
    """The longest time between two runs of `entry`: its interval, or for a crontab the widest gap of a day."""
    if isinstance(entry, crontab):
        every_day = len(entry.day_of_week) == 7 and len(entry.day_of_month) == 31 and len(entry.month_of_year) == 12
        if not every_day:
            return 7 * 86400.0  # not every day: at least a day goes by without a run; only weekly is certain
        runs: list[int] = sorted(hour * 60 + minute for hour in entry.hour for minute in entry.minute)
        gaps = [later - earlier for earlier, later in itertools.pairwise(runs)]
        gaps.append(runs[0] + _DAY_MINUTES - runs[-1])  # from the day's last run to the next day's first
        return max(gaps) * 60.0  # minutes to seconds
    run_every: timedelta = entry.run_every
    return float(run_every.total_seconds())
