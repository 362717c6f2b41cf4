"""Article tag rules, including the reserved `idem-*` sanitiser (reference §1.5, §7 item 29)."""

from __future__ import annotations

import pytest

from knowledge.tags import MAX_TAGS, sanitize_tags, validate_tags
from loopmem.errors import ValidationFailed


def test_tags_are_trimmed_lowercased_and_deduplicated():
    assert validate_tags([" Python ", "python", "ci:deploy", "v1.2_x-y"]) == ["python", "ci:deploy", "v1.2_x-y"]


def test_a_malformed_reserved_tag_is_dropped_and_a_well_formed_one_kept():
    assert validate_tags(["idem-design", "idem-url-7ebe1ca33431", "design"]) == ["idem-url-7ebe1ca33431", "design"]


@pytest.mark.parametrize("tag", ["idem-", "idem-url", "idem-url-7ebe1ca3343", "idem-url-xyz7ebe1ca33431", "idem--abc"])
def test_reserved_tags_need_a_kind_and_at_least_12_hex_digits(tag):
    assert validate_tags([tag]) == []


def test_reserved_tags_are_matched_after_lowercasing():
    assert validate_tags(["IDEM-URL-7EBE1CA33431"]) == ["idem-url-7ebe1ca33431"]


def test_an_invalid_ordinary_tag_is_refused_with_its_name():
    with pytest.raises(ValidationFailed) as caught:
        validate_tags(["ok", "-leading-dash", "has space", "x" * 65])
    assert caught.value.details == {
        "tags": [
            "each tag must match [a-z0-9][a-z0-9_.:-]* and be at most 64 characters; "
            f"invalid: '-leading-dash', 'has space', '{'x' * 65}'"
        ]
    }


def test_sixty_four_characters_is_the_longest_tag():
    assert validate_tags(["x" * 64]) == ["x" * 64]


def test_more_than_twenty_tags_are_refused_but_twenty_are_fine():
    twenty = [f"t{n}" for n in range(MAX_TAGS)]
    assert validate_tags(twenty) == twenty
    with pytest.raises(ValidationFailed) as caught:
        validate_tags([*twenty, "t20"])
    assert caught.value.details == {"tags": ["at most 20 tags (got 21)"]}


def test_dropped_reserved_tags_do_not_count_towards_the_limit():
    assert len(validate_tags([*(f"t{n}" for n in range(MAX_TAGS)), "idem-design"])) == MAX_TAGS


def test_sanitize_keeps_what_is_valid_and_never_refuses():
    messy = [
        "Good",
        42,
        None,
        "",
        "  ",
        "bad tag",
        "idem-design",
        "idem-sha-0123456789ab",
        *(f"n{i}" for i in range(30)),
    ]
    assert sanitize_tags(messy) == ["good", "idem-sha-0123456789ab", *(f"n{i}" for i in range(18))]
