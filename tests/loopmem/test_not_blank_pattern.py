"""The schema's text patterns mean what the service means: "not blank" is `str.strip()` leaving something, and no
text holds a NUL (the edge's 400 `invalid_text`). The engines that read them agree: Python's `re` and the Rust
engine schemathesis validates with (JSON Schema's ECMA-262 reads the same syntax)."""

from __future__ import annotations

import re
import sys

import jsonschema_rs
import pytest

from loopmem.params import NOT_BLANK_PATTERN, TEXT_PATTERN

NOT_BLANK = re.compile(NOT_BLANK_PATTERN)
TEXT = re.compile(TEXT_PATTERN)


def test_the_pattern_refuses_exactly_the_characters_python_strips_and_nul():
    # Every code point: ECMA-262's `\s` and Python's differ (\x1c-\x1f, \x85, \ufeff), so the class lists Python's.
    disagree = [
        hex(c) for c in range(sys.maxunicode + 1) if (NOT_BLANK.search(chr(c)) is None) != (chr(c).isspace() or c == 0)
    ]
    assert disagree == []


@pytest.mark.parametrize("text", ["", "\x1e", " \x85 ", "\u3000\u1680", "\t\n", "\x00", " x\x00", "\x00x", "x\n\x00"])
def test_blank_text_or_text_with_a_nul_does_not_match(text):
    assert not text.strip() or "\x00" in text
    assert NOT_BLANK.search(text) is None


@pytest.mark.parametrize("text", ["a", " \ufeff ", "  x  ", "\u3000x\n", "x\ny", "\U0001f600", " \x01 "])
def test_text_with_something_in_it_matches(text):
    assert text.strip()
    assert NOT_BLANK.search(text) is not None


@pytest.mark.parametrize("text", ["", " ", "x\ny\n", "\U0001f600", "\x01\x7f"])
def test_any_text_without_a_nul_matches_the_text_pattern(text):
    assert TEXT.search(text) is not None


@pytest.mark.parametrize("text", ["\x00", "a\x00", "\x00\n", "x\n\x00y"])
def test_text_with_a_nul_does_not_match_the_text_pattern(text):
    assert TEXT.search(text) is None


@pytest.mark.parametrize("pattern", [NOT_BLANK_PATTERN, TEXT_PATTERN])
@pytest.mark.parametrize(
    "text", ["", " ", "\x1e\x85", "a", " \ufeff ", "\u3000x\n", "\U0001f600", "\x00", " x\x00", "x\n\x00y", "x\n"]
)
def test_the_validator_schemathesis_uses_reads_the_patterns_as_python_does(pattern, text):
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    assert validator.is_valid(text) == (re.search(pattern, text) is not None)


def test_the_not_blank_pattern_matches_long_text_in_linear_time():
    # One way to match (leading blanks, then the first other character): no backtracking blow-up at 100,000 bytes.
    assert NOT_BLANK.search(" " * 100_000 + "x" * 100_000) is not None
    assert NOT_BLANK.search(" " * 100_000 + "x" * 100_000 + "\x00") is None
