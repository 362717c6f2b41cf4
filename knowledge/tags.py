"""Article tag rules (reference §1.5, DESIGN §10), including the reserved `idem-*` sanitiser.

A tag is lowercase `[a-z0-9][a-z0-9_.:-]*`, at most 64 characters; an article has at most 20. Tags starting
with `idem-` are reserved for idempotency markers written by tools, and only the well-formed shape
`idem-<kind>-<hex>` is kept: `<kind>` is `[a-z0-9]+` and `<hex>` is 12 to 64 lowercase hex digits (a digest
prefix), e.g. `idem-url-7ebe1ca33431`. A malformed reserved tag (`idem-design`, `idem-`, `idem-url-xyz`)
is dropped silently rather than refused, as the reference does: it is a marker a client got wrong, not
content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from loopmem.errors import ValidationFailed

MAX_TAG_LENGTH = 64
MAX_TAGS = 20
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.:-]*$")
RESERVED_PREFIX = "idem-"
RESERVED_TAG_PATTERN = re.compile(r"^idem-[a-z0-9]+-[0-9a-f]{12,64}$")


def is_valid_tag(tag: str) -> bool:
    """A well-formed, normalised tag (a reserved one must have the reserved shape)."""
    if len(tag) > MAX_TAG_LENGTH or not TAG_PATTERN.match(tag):
        return False
    return not tag.startswith(RESERVED_PREFIX) or bool(RESERVED_TAG_PATTERN.match(tag))


def _is_malformed_reserved(tag: str) -> bool:
    return tag.startswith(RESERVED_PREFIX) and not is_valid_tag(tag)


def _unique(tags: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(tags))


def validate_tags(tags: Iterable[str]) -> list[str]:
    """Tags of an API write: trimmed, lowercased, deduplicated; malformed reserved tags dropped.

    Any other invalid tag, or more than 20, is a 422 `validation_failed` naming the offenders.
    """
    normalised = _unique(t.strip().lower() for t in tags)
    kept = [t for t in normalised if not _is_malformed_reserved(t)]
    invalid = [t for t in kept if not is_valid_tag(t)]
    errors: list[str] = []
    if invalid:
        errors.append(
            f"each tag must match [a-z0-9][a-z0-9_.:-]* and be at most {MAX_TAG_LENGTH} characters; "
            f"invalid: {', '.join(repr(t) for t in invalid)}"
        )
    if len(kept) > MAX_TAGS:
        errors.append(f"at most {MAX_TAGS} tags (got {len(kept)})")
    if errors:
        raise ValidationFailed(details={"tags": errors})
    return kept


def sanitize_tags(tags: Iterable[object]) -> list[str]:
    """Tags carried over from elsewhere (a graduating memory): keep the valid ones, never refuse.

    Non-strings, blanks, invalid and malformed reserved tags are dropped; the first 20 survivors are kept.
    """
    normalised = _unique(t.strip().lower() for t in tags if isinstance(t, str))
    return [t for t in normalised if is_valid_tag(t)][:MAX_TAGS]
