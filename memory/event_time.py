"""Event time: the days a text says something happened, resolved against the day it was said.

"I handed in my notice last Friday" written on Monday 12 January 2026 happened on 9 January; "the summer party on
3 July" said on 14 April 2026 is on 3 July 2026; "I bought it last month" said in October 2025 happened in September
2025. Memories keep these spans (`Memory.occurred_on`, one range per expression, end exclusive) beside the text, so
recall can rank by the time a question names and filter by `occurred_after` / `occurred_before`.

English only, and a closed grammar, written for precision: ISO dates; a day and a month in either order, with an
optional weekday and year ("Monday 1 December", "March 16th, 2026", "3 July"); a month with a year or a preposition
("September 2025", "in May", "last March"); a year after "in", "during", "since" or "by"; yesterday, today,
tomorrow; a weekday (last, this, next, on: "last Saturday"); N days, weeks, months or years ago, or in N days or
weeks; last, this or next week, weekend, month or year; last, this or next summer, winter, spring, autumn or fall.
A day or month without a year is the occurrence nearest the reference ("last" and "next" pick the one before and
after). A general date parser (`dateparser.search_dates`) was measured on sample sentences and read "We" as a
Wednesday, "three days a week" and "kept for 30 days" as dates, and "May I ask" as May: wrong event times would
rank memories by days nobody named, so the grammar stays closed.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
}  # fmt: skip
# Northern-hemisphere meteorological seasons: (first month, months long).
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}
# Month names that are also ordinary words count only when capitalised ("May I ask", "march on").
_CAPITALISED_ONLY = {"may", "march", "jan", "mar", "jun", "oct", "dec", "sept", "sep", "aug", "apr", "nov", "feb"}

_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(_WEEKDAYS)
_NUMBER = r"\d{1,2}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
_ORDINAL = r"(?:st|nd|rd|th)?"
_DAY = r"(\d{1,2})" + _ORDINAL
_WEEKDAY_PREFIX = rf"(?:(?:{_WEEKDAY}),?\s+(?:the\s+)?)?"
_YEAR_AFTER = r"(?:,?\s+(\d{4}))?"
_DEICTIC = r"yesterday|today|tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening)"

# Longest forms first: a matched stretch is blanked, so "1 December 2025" is not read again as "December 2025".
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("day_month", re.compile(rf"\b{_WEEKDAY_PREFIX}{_DAY}(?:\s+of)?\s+({_MONTH})\b\.?{_YEAR_AFTER}", re.I)),
    ("month_day", re.compile(rf"\b{_WEEKDAY_PREFIX}({_MONTH})\.?\s+{_DAY}\b{_YEAR_AFTER}", re.I)),
    ("month_year", re.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)),
    ("month", re.compile(rf"\b(in|during|since|until|by|of|last|this|next|early|late|mid|mid-)\s+({_MONTH})\b", re.I)),
    ("year", re.compile(r"\b(?:in|during|since|by)\s+((?:19|20)\d{2})\b", re.I)),
    ("ago", re.compile(rf"\b({_NUMBER})\s+(day|week|month|year)s?\s+ago\b", re.I)),
    ("ahead", re.compile(rf"\bin\s+({_NUMBER})\s+(day|week)s?\b|\b({_NUMBER})\s+(day|week)s?\s+from\s+now\b", re.I)),
    ("relative_period", re.compile(r"\b(last|this|next)\s+(week|weekend|month|year)\b", re.I)),
    ("season", re.compile(r"\b(last|this|next)\s+(spring|summer|autumn|fall|winter)\b", re.I)),
    ("weekday", re.compile(rf"\b(?:(last|this|next|on|coming)\s+)?({_WEEKDAY})\b", re.I)),
    ("deictic", re.compile(rf"\b({_DEICTIC})\b", re.I)),
]  # fmt: skip


@dataclass(frozen=True, order=True)
class DaySpan:
    """Whole days from `start` up to, not including, `end`."""

    start: date
    end: date

    @classmethod
    def day(cls, day: date) -> DaySpan:
        return cls(day, day + timedelta(days=1))

    @classmethod
    def month(cls, year: int, month: int) -> DaySpan:
        return cls(date(year, month, 1), _add_months(date(year, month, 1), 1))

    @property
    def days(self) -> int:
        return (self.end - self.start).days

    def overlap(self, other: DaySpan) -> int:
        """How many days the two spans share."""
        return max(0, (min(self.end, other.end) - max(self.start, other.start)).days)

    def closeness(self, other: DaySpan) -> float:
        """Shared days over the days either covers (Jaccard): 1 for the same span, small for a day within a year."""
        shared = self.overlap(other)
        return shared / (self.days + other.days - shared) if shared else 0.0


# Only a text's first this many characters are read: a memory is a statement, and reading a 100 KB one whole took
# up to 0.66 s of the write (twelve patterns tried at every position), where this many take a few milliseconds.
MAX_READ_CHARS = 2_000


def event_spans(text: str, reference: date) -> list[DaySpan]:
    """The spans `text` names (in its first MAX_READ_CHARS characters), resolved against `reference` (the day it
    was said), in order, each once."""
    spans: list[DaySpan] = []
    for span in _matches(text[:MAX_READ_CHARS], reference):
        if span not in spans:
            spans.append(span)
    return sorted(spans)


def _matches(text: str, reference: date) -> Iterator[DaySpan]:
    remaining = text
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(remaining):
            span = _resolve(kind, match, reference)
            if span is not None:
                yield span
            # Blank what was read, a date or not ("the 31st of February"), so that a shorter form cannot read it
            # again; same length, so later offsets stay valid.
            remaining = remaining[: match.start()] + " " * (match.end() - match.start()) + remaining[match.end() :]


def _resolve(kind: str, match: re.Match[str], reference: date) -> DaySpan | None:
    try:
        return _RESOLVERS[kind](match, reference)
    except ValueError:  # 31 February, month 13: not a date
        return None


def _iso(match: re.Match[str], _: date) -> DaySpan:
    return DaySpan.day(date(int(match[1]), int(match[2]), int(match[3])))


def _month_number(name: str) -> int | None:
    key = name.lower().rstrip(".")
    if key in _CAPITALISED_ONLY and not name[:1].isupper():
        return None
    return _MONTHS.get(key)


def _day_in_month(day: int, month: int, year: str | None, reference: date) -> DaySpan | None:
    if year:
        return DaySpan.day(date(int(year), month, day))
    candidates = []
    for offset in (-1, 0, 1):
        try:
            candidates.append(date(reference.year + offset, month, day))
        except ValueError:  # 29 February of a common year
            continue
    if not candidates:
        return None
    return DaySpan.day(min(candidates, key=lambda when: (abs((when - reference).days), when > reference)))


def _day_month(match: re.Match[str], reference: date) -> DaySpan | None:
    month = _month_number(match[2])
    return None if month is None else _day_in_month(int(match[1]), month, match[3], reference)


def _month_day(match: re.Match[str], reference: date) -> DaySpan | None:
    month = _month_number(match[1])
    return None if month is None else _day_in_month(int(match[2]), month, match[3], reference)


def _month_year(match: re.Match[str], _: date) -> DaySpan | None:
    month = _month_number(match[1])
    return None if month is None else DaySpan.month(int(match[2]), month)


def _month(match: re.Match[str], reference: date) -> DaySpan | None:
    month = _month_number(match[2])
    if month is None:
        return None
    this_year = DaySpan.month(reference.year, month)
    word = match[1].lower()
    if word == "last":
        return this_year if this_year.end <= reference.replace(day=1) else DaySpan.month(reference.year - 1, month)
    if word == "next":
        return this_year if this_year.start > reference else DaySpan.month(reference.year + 1, month)
    options = [DaySpan.month(reference.year + offset, month) for offset in (-1, 0, 1)]
    return min(options, key=lambda span: (abs((span.start - reference.replace(day=1)).days), span.start > reference))


def _year(match: re.Match[str], _: date) -> DaySpan:
    year = int(match[1])
    return DaySpan(date(year, 1, 1), date(year + 1, 1, 1))


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[re.sub(r"\s+", " ", word.lower())]


def _ago(match: re.Match[str], reference: date) -> DaySpan:
    count, unit = _count(match[1]), match[2].lower()
    if unit == "day":
        return DaySpan.day(reference - timedelta(days=count))
    if unit == "week":
        return DaySpan.day(reference - timedelta(weeks=count))
    if unit == "month":
        when = _add_months(reference.replace(day=1), -count)
        return DaySpan.month(when.year, when.month)
    return DaySpan(date(reference.year - count, 1, 1), date(reference.year - count + 1, 1, 1))


def _ahead(match: re.Match[str], reference: date) -> DaySpan:
    count = _count(match[1] or match[3])
    unit = (match[2] or match[4]).lower()
    return DaySpan.day(reference + (timedelta(days=count) if unit == "day" else timedelta(weeks=count)))


def _relative_period(match: re.Match[str], reference: date) -> DaySpan:
    step = {"last": -1, "this": 0, "next": 1}[match[1].lower()]
    unit = match[2].lower()
    if unit == "week":
        monday = reference - timedelta(days=reference.weekday()) + timedelta(weeks=step)
        return DaySpan(monday, monday + timedelta(days=7))
    if unit == "weekend":
        saturday = reference - timedelta(days=reference.weekday()) + timedelta(days=5, weeks=step)
        return DaySpan(saturday, saturday + timedelta(days=2))
    if unit == "month":
        first = _add_months(reference.replace(day=1), step)
        return DaySpan.month(first.year, first.month)
    return DaySpan(date(reference.year + step, 1, 1), date(reference.year + step + 1, 1, 1))


def _season(match: re.Match[str], reference: date) -> DaySpan:
    first_month, months = _SEASONS[match[2].lower()]
    # The season that contains the reference, or the last one that began before it.
    start = date(reference.year, first_month, 1)
    if start > reference:
        start = date(reference.year - 1, first_month, 1)
    step = {"last": -1, "this": 0, "next": 1}[match[1].lower()]
    current_ended = _add_months(start, months) <= reference
    if step == -1 and current_ended:
        step = 0  # "last summer" in October is this year's summer
    start = date(start.year + step, first_month, 1)
    return DaySpan(start, _add_months(start, months))


def _weekday(match: re.Match[str], reference: date) -> DaySpan:
    weekday = _WEEKDAYS[match[2].lower()]
    back = (reference.weekday() - weekday) % 7 or 7  # days to the last one strictly before
    ahead = (weekday - reference.weekday()) % 7 or 7  # days to the next one strictly after
    word = (match[1] or "").lower()
    if word == "last":
        return DaySpan.day(reference - timedelta(days=back))
    if word in ("next", "coming"):
        return DaySpan.day(reference + timedelta(days=ahead))
    if reference.weekday() == weekday:
        return DaySpan.day(reference)
    return DaySpan.day(reference - timedelta(days=back) if back <= ahead else reference + timedelta(days=ahead))


def _deictic(match: re.Match[str], reference: date) -> DaySpan:
    word = re.sub(r"\s+", " ", match[1].lower())
    offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)
    return DaySpan.day(reference + timedelta(days=offset))


def _add_months(first_of_month: date, months: int) -> date:
    index = first_of_month.year * 12 + first_of_month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


_RESOLVERS = {
    "iso": _iso,
    "day_month": _day_month,
    "month_day": _month_day,
    "month_year": _month_year,
    "month": _month,
    "year": _year,
    "ago": _ago,
    "ahead": _ahead,
    "relative_period": _relative_period,
    "season": _season,
    "weekday": _weekday,
    "deictic": _deictic,
}
