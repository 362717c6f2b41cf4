"""The schema's "not blank" pattern means what the service means: `str.strip()` leaves something."""

from __future__ import annotations

import re
import sys

import pytest

from loopmem.params import NOT_BLANK_PATTERN

NOT_BLANK = re.compile(NOT_BLANK_PATTERN)


def test_the_pattern_refuses_exactly_the_characters_python_strips():
    # Every code point: ECMA-262's `\s` and Python's differ (\x1c-\x1f, \x85, \ufeff), so the class lists Python's.
    disagree = [hex(c) for c in range(sys.maxunicode + 1) if (NOT_BLANK.search(chr(c)) is None) != chr(c).isspace()]
    assert disagree == []


@pytest.mark.parametrize("text", ["\x1e", " \x85 ", "\u3000\u1680", "\t\n"])
def test_what_the_service_calls_blank_does_not_match(text):
    assert not text.strip()
    assert NOT_BLANK.search(text) is None


@pytest.mark.parametrize("text", ["a", " \ufeff ", "  x  "])
def test_text_with_something_in_it_matches(text):
    assert text.strip()
    assert NOT_BLANK.search(text) is not None
