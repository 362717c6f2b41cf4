"""Wallet seed phrases: a run of 12, 15, 18, 21 or 24 words of the BIP39 English wordlist.

A seed phrase is the whole wallet: whoever reads it owns the funds. It has no prefix and no label it must carry,
but its words come from one published list of 2,048 (BIP39, taken from trezor's `mnemonic` package, MIT, pinned
in requirements/base.txt) and its length is one of five. Ordinary prose is not such a run: the list holds
almost none of the words English sentences are built with (`the`, `a`, `is`, `of`, `and`, `to`, `in`, `for`,
`with`, `on`, `it`, `my`, `your` are all missing from it), so a sentence breaks the run every few words, and
punctuation breaks it too.

What counts as a run: words of 3 to 8 letters (every BIP39 word is), each in the list, written in one case
(lower case, the first letter of the first word may be a capital; or all in capitals), separated by whitespace
and optionally numbered as wallets show them (`1. abandon 2. ability …`, one per line). A run of exactly a
seed's length is a finding. A longer run is one when a seed's length at its start or its end passes BIP39's
checksum (a seed phrase with a listed word beside it); the checksum is what every generated phrase carries,
and a random run passes it one time in 16 (12 words) to 256 (24).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from mnemonic import Mnemonic

SEED_LENGTHS = (12, 15, 18, 21, 24)

# A run of at least 12 words of 3 to 8 letters, optionally numbered, and nothing word-like on either side.
# Every repetition is bounded by the text, and a word is followed only by whitespace, so a failed attempt costs
# at most the 12 words it looked at: linear time.
_RUN = re.compile(
    r"(?<![\w'\u2019@/.-])(?:[A-Za-z]{3,8}\s+(?:\d{1,2}[.):]?\s+)?){11,}[A-Za-z]{3,8}(?![\w'\u2019@/-]|\.\w)"
)
_WORD = re.compile(r"[A-Za-z]+")
# The number before a numbered phrase's first word: the span takes it, so a redacted list leaves no "1. " behind.
_LEADING_NUMBER = re.compile(r"(?:^|(?<=\s))\d{1,2}[.):]?[ \t]+$")


@functools.cache
def _mnemonic() -> Mnemonic:
    return Mnemonic("english")


@functools.cache
def wordlist() -> frozenset[str]:
    """The 2,048 words of the BIP39 English list."""
    return frozenset(_mnemonic().wordlist)


def _one_case(words: list[str]) -> bool:
    if all(word.isupper() for word in words):
        return True
    return words[0][1:].islower() and all(word.islower() for word in words[1:])


def _seed_windows(words: list[tuple[str, int, int]]) -> Iterator[tuple[int, int]]:
    """The (start, end) offsets of the seed phrase in one run of listed words, if it holds one."""
    if len(words) in SEED_LENGTHS:
        yield words[0][1], words[-1][2]
        return
    check = _mnemonic().check
    for length in reversed(SEED_LENGTHS):
        if length >= len(words):
            continue
        for window in (words[:length], words[-length:]):
            if check(" ".join(word for word, _, _ in window)):
                yield window[0][1], window[-1][2]
                return


_NUMBERING = re.compile(r"\d{1,2}[.):]?")


def _may_hold_a_phrase(text: str) -> bool:
    """Whether `text` has 10 listed words in a row between whitespace, numbers aside: a necessary condition of a
    finding (only a run's first and last word can have punctuation attached), checked with str.split, which is a
    third of the cost of the regex on prose."""
    listed = wordlist()
    run = 0
    for token in text.split():
        if token.lower() in listed:
            run += 1
            if run >= SEED_LENGTHS[0] - 2:
                return True
        elif not (token[0].isdigit() and _NUMBERING.fullmatch(token)):
            run = 0
    return False


def findings(text: str) -> Iterator[tuple[str, int, int]]:
    """("seed_phrase", start, end) of each BIP39 seed phrase in `text`."""
    if not _may_hold_a_phrase(text):
        return
    listed = wordlist()
    for match in _RUN.finditer(text):
        run: list[tuple[str, int, int]] = []
        # Words not in the list (or in another case) split the match into runs of listed words.
        for word in (*_WORD.finditer(match.group(0)), None):
            if word is not None and word.group(0).lower() in listed:
                run.append((word.group(0), match.start() + word.start(), match.start() + word.end()))
                continue
            if len(run) >= SEED_LENGTHS[0] and _one_case([w for w, _, _ in run]):
                for start, end in _seed_windows([(w.lower(), s, e) for w, s, e in run]):
                    number = _LEADING_NUMBER.search(text, max(0, start - 8), start)
                    yield "seed_phrase", number.start() if number else start, end
            run = []
