"""Event time (memory.event_time): the days a text names, resolved against the day it was said."""

from __future__ import annotations

from datetime import date

import pytest

from memory.event_time import DaySpan, event_spans


def _days(text: str, said: date) -> list[tuple[str, int]]:
    return [(span.start.isoformat(), span.days) for span in event_spans(text, said)]


@pytest.mark.parametrize(
    ("text", "said", "expected"),
    [
        # Weekdays: "last" is the one strictly before, "next" the one after, "on" the nearest (past on a tie).
        ("We brought Pepper home last Saturday.", date(2026, 3, 16), [("2026-03-14", 1)]),
        ("I handed in my notice last Friday.", date(2026, 1, 12), [("2026-01-09", 1)]),
        ("Kofi can fit it on Thursday.", date(2025, 7, 22), [("2025-07-24", 1)]),
        ("We met on Saturday at Battersea.", date(2026, 2, 3), [("2026-01-31", 1)]),
        ("Let's talk next Monday.", date(2026, 3, 16), [("2026-03-23", 1)]),
        ("It is due on Monday.", date(2026, 3, 16), [("2026-03-16", 1)]),  # today is Monday
        # Days and months, in either order, with a weekday, an ordinal or a year; the nearest year when none.
        ("They'll respray it on March 16th.", date(2026, 3, 10), [("2026-03-16", 1)]),
        ("Kenji is welcome at the summer party on 3 July.", date(2026, 4, 14), [("2026-07-03", 1)]),
        (
            "Booked for Monday 1 December and Tuesday 2 December.",
            date(2025, 11, 17),
            [("2025-12-01", 1), ("2025-12-02", 1)],
        ),
        ("See you on the 5th of May, 2024.", date(2026, 1, 1), [("2024-05-05", 1)]),
        ("The contract started on January 5, 2025.", date(2026, 1, 1), [("2025-01-05", 1)]),
        ("The invoice was due on 15 September.", date(2025, 10, 14), [("2025-09-15", 1)]),
        # Months and years.
        ("I bought it in September 2025.", date(2026, 12, 6), [("2025-09-01", 30)]),
        ("We moved in 2019.", date(2026, 1, 1), [("2019-01-01", 365)]),
        ("Prices went up last March.", date(2026, 5, 2), [("2026-03-01", 31)]),
        ("Prices went up last March.", date(2026, 2, 2), [("2025-03-01", 31)]),
        # Relative periods.
        ("I bought a Wacom Cintiq 22 last month.", date(2025, 10, 14), [("2025-09-01", 30)]),
        ("I ran the marathon two weeks ago.", date(2026, 4, 27), [("2026-04-13", 1)]),
        ("It broke 3 days ago.", date(2026, 4, 27), [("2026-04-24", 1)]),
        ("We'll know in 10 days.", date(2026, 4, 27), [("2026-05-07", 1)]),
        ("The audit was last week.", date(2026, 3, 18), [("2026-03-09", 7)]),  # Monday to Sunday
        ("We went hiking last weekend.", date(2026, 3, 18), [("2026-03-14", 2)]),
        ("Last summer we went to Spain.", date(2026, 10, 5), [("2026-06-01", 92)]),
        ("Last summer we went to Spain.", date(2026, 7, 5), [("2025-06-01", 92)]),
        ("I fixed it yesterday and ship it tomorrow.", date(2026, 3, 1), [("2026-02-28", 1), ("2026-03-02", 1)]),
        ("Deployed on 2026-03-16.", date(2026, 12, 6), [("2026-03-16", 1)]),
    ],
)
def test_named_days_resolve_against_the_day_they_were_said(text, said, expected):
    assert _days(text, said) == expected


@pytest.mark.parametrize(
    "text",
    [
        # What a general date parser reads as dates: none of it names a day.
        "The pay is about 18 percent better, and it's hybrid, three days a week in the office.",
        "May I ask what you think about the second option?",
        "Logs are kept for 30 days and backups for 12 months.",
        "We prefer tabs. We march on regardless.",
        "The build takes 3:41 on a good day.",
        "Version 2026.3 is out; see ticket 2026-031.",
        "I'll call you on the 31st of February.",  # not a date
    ],
)
def test_text_that_names_no_day_has_no_event_time(text):
    assert event_spans(text, date(2026, 1, 12)) == []


def test_a_day_named_twice_is_one_span_and_spans_come_in_order():
    spans = event_spans("On 3 July, yes, 2026-07-03, after June 30.", date(2026, 4, 14))
    assert spans == [DaySpan.day(date(2026, 6, 30)), DaySpan.day(date(2026, 7, 3))]


def test_closeness_is_one_for_the_same_span_and_small_for_a_day_in_a_month():
    day, month = DaySpan.day(date(2025, 9, 15)), DaySpan.month(2025, 9)
    assert day.closeness(day) == 1.0
    assert month.closeness(month) == 1.0
    assert day.closeness(month) == pytest.approx(1 / 30)
    assert day.closeness(DaySpan.day(date(2025, 9, 16))) == 0.0


def test_only_a_texts_first_characters_are_read():
    said = date(2026, 1, 12)
    assert event_spans("on 2026-03-16. " + "and so on " * 5_000, said) == [DaySpan.day(date(2026, 3, 16))]
    assert event_spans("and so on " * 300 + "on 2026-03-16.", said) == []  # the date starts past MAX_READ_CHARS
