"""The fresh secret corpus (`tests/secret_corpus_fresh.py`) checked on its own terms, not against the detector.

The checksums are re-implemented here rather than imported, so a generator bug cannot vouch for itself.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict

import pytest
from mnemonic import Mnemonic

from tests.secret_corpus_fresh import (
    LOOK_ALIKE_FAMILIES,
    SECRET_FAMILIES,
    SEED,
    generate,
    look_alikes,
    secret_cases,
)


def luhn_valid(number: str) -> bool:
    digits = [int(ch) for ch in number]
    odd = digits[-1::-2]
    even = [sum(divmod(2 * d, 10)) for d in digits[-2::-2]]
    return (sum(odd) + sum(even)) % 10 == 0


def iban_valid(value: str) -> bool:
    compact = value.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def test_the_corpus_is_large_enough():
    secrets, others = secret_cases(), look_alikes()
    assert len(secrets) >= 150
    assert len({c.kind for c in secrets}) >= 60
    assert len(others) >= 150


def test_ids_are_unique():
    assert len({c.id for c in secret_cases()}) == len(secret_cases())
    assert len({c.id for c in look_alikes()}) == len(look_alikes())


def test_each_secret_occurs_exactly_once_in_its_text():
    bad = [c.id for c in secret_cases() if c.text.count(c.secret) != 1]
    assert bad == [], f"seed {SEED}"


def test_families_are_declared_and_a_kind_stays_in_one_family():
    assert {c.family for c in secret_cases()} == set(SECRET_FAMILIES)
    assert {c.family for c in look_alikes()} == set(LOOK_ALIKE_FAMILIES)
    families_of_kind: dict[str, set[str]] = defaultdict(set)
    for c in secret_cases():
        families_of_kind[c.kind].add(c.family)
    assert all(len(f) == 1 for f in families_of_kind.values())


def test_secrets_split_by_kind():
    splits_of_kind: dict[str, set[str]] = defaultdict(set)
    for c in secret_cases():
        splits_of_kind[c.kind].add(c.split)
    assert all(len(s) == 1 for s in splits_of_kind.values())
    kinds_per_split = Counter(next(iter(s)) for s in splits_of_kind.values())
    dev_share = kinds_per_split["dev"] / len(splits_of_kind)
    assert 0.45 <= dev_share <= 0.75


def test_every_family_with_several_kinds_or_cases_is_in_both_splits():
    kinds: dict[str, dict[str, str]] = defaultdict(dict)
    for c in secret_cases():
        kinds[c.family][c.kind] = c.split
    one_sided = [f for f, k in kinds.items() if len(k) >= 3 and set(k.values()) != {"dev", "test"}]
    assert one_sided == []
    cases: dict[str, set[str]] = defaultdict(set)
    for o in look_alikes():
        cases[o.family].add(o.split)
    assert [f for f, s in cases.items() if s != {"dev", "test"}] == []


def test_the_split_does_not_depend_on_the_seed():
    a, b = generate(1), generate(2)
    assert [(c.id, c.split) for c in a.secrets] == [(c.id, c.split) for c in b.secrets]
    assert [(o.id, o.split) for o in a.look_alikes] == [(o.id, o.split) for o in b.look_alikes]


def test_card_numbers_are_luhn_valid():
    cards = [c for c in secret_cases() if c.family == "payment_card"]
    assert len(cards) >= 8
    for c in cards:
        number = re.sub(r"[ -]", "", c.secret)
        assert number.isdigit(), c.id
        assert 13 <= len(number) <= 19, c.id
        assert luhn_valid(number), (c.id, SEED)


def test_ibans_are_mod_97_valid():
    ibans = [c for c in secret_cases() if c.family == "bank_account"]
    assert len({c.secret[:2] for c in ibans}) >= 6
    assert all(iban_valid(c.secret) for c in ibans), SEED


def test_look_alike_cards_and_ibans_fail_their_checksums():
    cards = [o for o in look_alikes() if o.id.startswith("card_like")]
    assert len(cards) >= 4
    for o in cards:
        runs = [re.sub(r"[ -]", "", m) for m in re.findall(r"\d[\d -]{11,}\d", o.text)]
        assert runs, o.id
        assert not any(luhn_valid(r) for r in runs), (o.id, SEED)
    bad_ibans = [o for o in look_alikes() if o.id.startswith("iban_bad")]
    assert len(bad_ibans) >= 3
    for o in bad_ibans:
        match = re.search(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4})+", o.text)
        assert match, o.id
        assert not iban_valid(match.group()), (o.id, SEED)


def test_no_look_alike_holds_a_luhn_valid_card_length_number():
    runs = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")
    found = [o.id for o in look_alikes() for m in runs.finditer(o.text) if luhn_valid(re.sub(r"[ -]", "", m.group()))]
    assert found == [], SEED


def test_national_ids_carry_their_check_characters():
    by_kind = {c.kind: c.secret for c in secret_cases() if c.family == "national_id"}
    dni = by_kind["es_dni"]
    assert "TRWAGMYFPDXBNJZSQVHLCKE"[int(dni[:8]) % 23] == dni[8]
    nir = by_kind["fr_nir"].replace(" ", "")
    assert 97 - int(nir[:13]) % 97 == int(nir[13:])
    assert luhn_valid(by_kind["ca_sin"].replace(" ", ""))
    bsn = by_kind["nl_bsn"]
    assert (sum(int(d) * w for d, w in zip(bsn[:8], range(9, 1, -1), strict=True)) - int(bsn[8])) % 11 == 0


def test_seed_phrases_carry_the_bip39_checksum():
    # The wordlist is data; the checksum is re-implemented: the first len/3 bits of SHA-256 of the entropy.
    index = {word: i for i, word in enumerate(Mnemonic("english").wordlist)}
    phrases = [c for c in secret_cases() if c.family == "wallet_seed"]
    assert {len(re.findall(r"[a-z]+", c.secret)) for c in phrases} >= {12, 24}
    for c in phrases:
        words = re.findall(r"[a-z]+", c.secret)
        bits = "".join(f"{index[word]:011b}" for word in words)
        n_check = len(words) // 3
        entropy = int(bits[:-n_check], 2).to_bytes(len(words) * 4 // 3, "big")
        digest = f"{hashlib.sha256(entropy).digest()[0]:08b}"
        assert bits[-n_check:] == digest[:n_check], (c.id, SEED)


def test_plain_prose_look_alikes_are_sentences_or_punctuated_lists():
    listed = set(Mnemonic("english").wordlist)
    for o in look_alikes():
        if o.family != "plain_prose":
            continue
        # Whatever their words, no 12 of them in a row are all on the BIP39 list with only spaces between.
        run = longest = 0
        for token in re.findall(r"[A-Za-z]+|[^A-Za-z\s]", o.text):
            run = run + 1 if token.lower() in listed else 0
            longest = max(longest, run)
        assert longest < 12, (o.id, SEED)


@pytest.mark.parametrize("seed", [1, 987654321])
def test_a_seed_reproduces_its_corpus(seed):
    assert generate(seed) == generate(seed)


def test_different_seeds_give_different_values():
    a, b = generate(1), generate(2)
    same = [x.id for x, y in zip(a.secrets, b.secrets, strict=True) if x.secret == y.secret]
    # Short human passwords and PINs may coincide by chance; random tokens never do.
    assert len(same) <= len(a.secrets) // 20, same
    changed = sum(x.text != y.text for x, y in zip(a.look_alikes, b.look_alikes, strict=True))
    assert changed >= len(a.look_alikes) // 2
