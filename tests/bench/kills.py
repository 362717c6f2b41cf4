"""A corpus build killed where a test says: the loader's row writer replaced by one that stops the build."""

from __future__ import annotations

import pytest

from bench import scale_corpus


class Killed(Exception):
    """What a test raises where a real build would have been killed."""


def kill_the_load_inside_its_second_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every later build (until the test ends or undoes it) dies ten rows into its second committed chunk."""
    row = scale_corpus._row
    written = 0

    def killed_inside_the_second_chunk(*args: object) -> tuple[object, ...]:
        nonlocal written
        written += 1
        if written > scale_corpus.CHUNK_ROWS + 10:
            raise Killed
        return row(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(scale_corpus, "_row", killed_inside_the_second_chunk)
