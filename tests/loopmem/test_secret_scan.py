"""The secret detector against the shared corpus (`tests/secret_corpus.py`): every secret caught over its span,
look-alikes left alone."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from kingfisher_sdk import __version__ as kingfisher_version

from loopmem.secret_guard.scan import Finding, redact, scan
from tests.secret_corpus import ALNUM, BENIGN, NON_ASCII, SECRETS, Secret, covers, pem, rand


@pytest.fixture(autouse=True)
def _fresh_rate_limit_counters() -> None:
    # Overrides the suite-wide fixture that clears the Redis cache: the detector is pure, this file needs no
    # Redis and no database.
    return


def test_the_corpus_has_at_least_25_secret_kinds_and_50_look_alikes() -> None:
    assert len({c.kind for c in SECRETS}) >= 25
    assert len(BENIGN) >= 50
    assert len({c.id for c in SECRETS}) == len(SECRETS)
    assert len({name for name, _ in BENIGN}) == len(BENIGN)


@pytest.mark.parametrize("case", [*SECRETS, NON_ASCII], ids=lambda c: c.id)
def test_each_secret_is_found_over_its_whole_span(case: Secret) -> None:
    findings = scan(case.text)
    assert covers(findings, case), findings


@pytest.mark.parametrize("case", SECRETS, ids=lambda c: c.id)
def test_redacting_a_secret_leaves_none_of_it(case: Secret) -> None:
    redacted = redact(case.text, scan(case.text))
    assert case.secret not in redacted
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize(("name", "text"), BENIGN, ids=[name for name, _ in BENIGN])
def test_a_look_alike_is_not_a_secret(name: str, text: str) -> None:
    assert scan(text) == []


def test_the_corpus_has_no_false_negatives_and_at_most_two_false_positives() -> None:
    false_negatives = [c.id for c in SECRETS if not covers(scan(c.text), c)]
    false_positives = [name for name, text in BENIGN if scan(text)]
    print(  # noqa: T201 - the figures are the point of this test; docs/security.md quotes them.
        f"secret corpus: {len(SECRETS)} secrets of {len({c.kind for c in SECRETS})} kinds, {len(BENIGN)} look-alikes; "
        f"false negatives {len(false_negatives)} {false_negatives}, false positives {len(false_positives)} "
        f"{false_positives}"
    )
    assert false_negatives == []
    assert len(false_positives) <= 2


def test_many_secrets_in_one_text_are_each_found_in_order() -> None:
    text = "\n".join(case.text for case in SECRETS[:12])
    findings = scan(text)
    assert [f.start for f in findings] == sorted(f.start for f in findings)
    for case in SECRETS[:12]:
        start = text.index(case.secret)
        assert any(f.start <= start and f.end >= start + len(case.secret) for f in findings)


def test_a_finding_inside_another_is_dropped() -> None:
    # The PEM block inside the service-account key is one finding, not two.
    case = next(c for c in SECRETS if c.kind == "gcp_service_account_key")
    assert [f.kind for f in scan(case.text)] == ["gcp_service_account_key"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\\n"], ids=["lf", "crlf", "json-escaped"])
def test_a_private_key_cut_short_ends_at_its_last_base64_line(newline: str) -> None:
    block = pem("RSA PRIVATE KEY", "cut").rsplit("\n", 3)[0].replace("\n", newline)
    text = f"Pasted:{newline}{block}{newline}Then the session ended, sorry about that."
    [finding] = scan(text)
    assert text[finding.start : finding.end] == block


def test_a_plugin_value_inside_a_longer_token_is_widened_to_it() -> None:
    # detect-secrets' GitHub plugin yields only the `ghp` prefix; the finding must cover the whole token,
    # and the `ghp` of an ordinary word is not one.
    token = "gh" + "p_" + rand("widen", ALNUM, 36)
    text = f"see ghpages, then export GH_TOKEN={token}"
    assert scan(text) == [Finding("github_token", text.index(token), text.index(token) + len(token))]


def test_redact_merges_overlapping_spans_under_the_widest_kind() -> None:
    text = "abcdefghij"
    findings = [Finding("jwt", 1, 6), Finding("discord_bot_token", 4, 8), Finding("password", 9, 10)]
    assert redact(text, findings) == "a[REDACTED:jwt]i[REDACTED:password]"


def test_redact_without_findings_returns_the_text() -> None:
    assert redact("nothing here", []) == "nothing here"


def test_a_finding_is_frozen_and_holds_no_secret() -> None:
    finding = scan("Charge with " + "sk" + "_live_" + rand("frozen", ALNUM, 24))[0]
    assert set(vars(finding)) == {"kind", "start", "end"}
    with pytest.raises(AttributeError):
        finding.kind = "other"  # type: ignore[misc]


def test_a_provider_token_after_multibyte_text_is_found_at_its_character_offsets() -> None:
    # The maintained rules count bytes of UTF-8; a Finding counts characters.
    token = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    text = f"Grüße aus Köln 🎉 — der Token ist {token}, bitte nicht teilen"
    start = text.index(token)
    assert any(f.start <= start and f.end >= start + len(token) for f in scan(text))
    assert all(f.end <= len(text) for f in scan(text))


def test_the_secret_rules_command_names_the_rules_in_force() -> None:
    out = io.StringIO()
    call_command("secret_rules", "--json", stdout=out)
    info = json.loads(out.getvalue())
    assert info["version"] == kingfisher_version
    assert info["formats"] > 400
    assert info["cache"] in ("loaded", "stored")
