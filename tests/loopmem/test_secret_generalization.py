"""The detector on data it was not fitted to: the fresh corpus (new values every run, split by kind into dev and
test) and the held-out set written apart from the detector. The figures per family are printed (`-s`) for
docs/security.md; a failing run prints its seed (LOOPMEM_SECRET_CORPUS_SEED / LOOPMEM_SECRET_HOLDOUT_SEED
reproduce it)."""

from __future__ import annotations

from collections import Counter

from loopmem.secret_guard.scan import Finding, scan
from tests import secret_corpus_fresh as fresh
from tests import secret_holdout as holdout


def covered(findings: list[Finding], text: str, secret: str) -> bool:
    start = text.index(secret)
    return any(f.start <= start and f.end >= start + len(secret) for f in findings)


def figures(split: str) -> tuple[list[str], list[str], str]:
    """The split's false negatives, false positives and a per-family report line."""
    missed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    false_negatives = []
    for case in fresh.secret_cases():
        if case.split != split:
            continue
        total[case.family] += 1
        if not covered(scan(case.text), case.text, case.secret):
            missed[case.family] += 1
            false_negatives.append(f"{case.kind}: {case.text!r}")
    look_alikes = [case for case in fresh.look_alikes() if case.split == split]
    false_positives = [f"{case.id}: {case.text!r}" for case in look_alikes if scan(case.text)]
    families = ", ".join(f"{family} {total[family] - missed[family]}/{total[family]}" for family in sorted(total))
    report = (
        f"fresh corpus (seed {fresh.SEED}), {split}: {sum(total.values())} secrets caught "
        f"{sum(total.values()) - len(false_negatives)}, {len(look_alikes)} look-alikes refused {len(false_positives)}; "
        f"by family: {families}"
    )
    return false_negatives, false_positives, report


def test_the_test_split_is_caught_and_its_look_alikes_are_stored() -> None:
    false_negatives, false_positives, report = figures("test")
    print(report)  # noqa: T201 - the figures are the point; docs/security.md quotes them.
    # Kinds the detector was not tuned on: every secret caught, at most 2 % of the look-alikes refused.
    look_alikes = sum(1 for case in fresh.look_alikes() if case.split == "test")
    assert false_negatives == [], (fresh.SEED, false_negatives)
    assert len(false_positives) <= 0.02 * look_alikes, (fresh.SEED, false_positives)


def test_the_dev_split_is_caught_and_its_look_alikes_are_stored() -> None:
    false_negatives, false_positives, report = figures("dev")
    print(report)  # noqa: T201
    assert len(false_negatives) <= 2, (fresh.SEED, false_negatives)
    assert false_positives == [], (fresh.SEED, false_positives)


def test_the_held_out_set() -> None:
    secrets = holdout.holdout_secrets()
    look_alikes = holdout.holdout_look_alikes()
    false_negatives = [
        f"{kind}: {text!r}" for _, kind, text, secret in secrets if not covered(scan(text), text, secret)
    ]
    # AWS's documented example keys count as secrets here (docs/security.md: a list of exempt examples is a list
    # a real key could be made to resemble); the held-out set calls them look-alikes.
    false_positives = [f"{name}: {text!r}" for name, text in look_alikes if scan(text) and "EXAMPLE" not in text]
    print(  # noqa: T201
        f"held-out set (seed {holdout.SEED}): {len(secrets)} secrets caught {len(secrets) - len(false_negatives)}, "
        f"{len(look_alikes)} look-alikes refused {len(false_positives)}; missed {false_negatives}"
    )
    # Known misses: a token split over lines, a code with letters, a code told without a verb, a username/password
    # pair with no word for password.
    assert len(false_negatives) <= 4, (holdout.SEED, false_negatives)
    assert len(false_positives) <= 1, (holdout.SEED, false_positives)
