"""Secrets made of words (seed phrases, passphrases told in prose), Heroku's bare-UUID keys and URL passwords
holding `?`, `#` or `@`: each found where it is one, and left alone in the text around it and in its look-alikes."""

from __future__ import annotations

import pytest
from mnemonic import Mnemonic

from loopmem.secret_guard.scan import scan

PHRASE_12 = Mnemonic("english").to_mnemonic(bytes(range(16)))
PHRASE_24 = Mnemonic("english").to_mnemonic(bytes(range(100, 132)))
HEROKU_KEY = "0c2d8f6e-4a1b-4c3d-9e8f-7a6b5c4d3e2f"


def spans(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in scan(text)]


@pytest.mark.parametrize(
    "text",
    [
        PHRASE_12,
        f"my wallet's recovery phrase: {PHRASE_12}, keep it safe",
        PHRASE_24.upper(),
        f"words\n{PHRASE_24.replace(' ', chr(10))}",
        f"seed {PHRASE_12} thanks",  # a listed word beside it: the checksum finds the phrase's edge
    ],
)
def test_a_seed_phrase_is_found_whole(text: str) -> None:
    phrase = PHRASE_12 if PHRASE_12 in text else PHRASE_24.upper() if PHRASE_24.upper() in text else None
    found = spans(text)
    assert [kind for kind, _ in found] == ["seed_phrase"]
    if phrase is not None:
        assert found[0][1] == phrase


def test_a_numbered_seed_phrase_is_redacted_with_its_numbers() -> None:
    listing = "\n".join(f"{i}. {word}" for i, word in enumerate(PHRASE_12.split(), 1))
    assert spans(f"Ledger sheet:\n{listing}") == [("seed_phrase", listing)]


@pytest.mark.parametrize(
    "text",
    [
        "we can talk about the budget after lunch on friday if you have time and bring the report",
        "Apple, banana, orange, lemon, mango, grape, melon, cherry, peach, pear, plum, olive, onion, garlic",
        " ".join(PHRASE_12.split()[:11]),  # eleven words are no seed's length
        "abandon " * 30,  # a run of listed words of no seed's length whose edges fail the checksum
    ],
)
def test_ordinary_words_are_not_a_seed_phrase(text: str) -> None:
    assert [kind for kind, _ in spans(text)] == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("the passphrase is tundra biscuit meadow saffron", "tundra biscuit meadow saffron"),
        ("die Passphrase für das Backup lautet tanne wolke kaffee fenster", "tanne wolke kaffee fenster"),
        ("la phrase secrète du coffre est lapin orage cerise montagne.", "lapin orage cerise montagne"),
        ("la frase de contraseña es gato nube río limón y nada más", "gato nube río limón"),
        ("my passphrase is banjo-paddle-biscuit if asked", "banjo-paddle-biscuit"),
    ],
)
def test_a_passphrase_of_plain_words_told_after_its_name_is_found(text: str, value: str) -> None:
    assert [v for _, v in spans(text)] == [value]


@pytest.mark.parametrize(
    "text",
    [
        "the passphrase is stored in 1Password under Backup Disk",
        "the passphrase is three random words",
        "die Passphrase ist im Tresor hinterlegt",
        "la phrase secrète est notée dans le coffre",
        "la frase de contraseña está en el sobre",
        "Passphrase protection makes brute force attacks much harder",
    ],
)
def test_what_is_said_of_a_passphrase_is_not_one(text: str) -> None:
    assert spans(text) == []


@pytest.mark.parametrize(
    "text",
    [f"heroku auth:token printed {HEROKU_KEY}", f"my heroku api token is {HEROKU_KEY}", f"HEROKU_API_KEY={HEROKU_KEY}"],
)
def test_a_heroku_key_is_a_uuid_beside_heroku_and_a_credential_word(text: str) -> None:
    assert [v for _, v in spans(text)] == [HEROKU_KEY]


@pytest.mark.parametrize(
    "text",
    [
        f"heroku apps:info shows ID {HEROKU_KEY}",
        f"Heroku release {HEROKU_KEY} failed",
        f"the heroku key for app {HEROKU_KEY}",
        f"token rotated; memory {HEROKU_KEY} superseded",
    ],
)
def test_a_uuid_named_as_an_id_or_far_from_heroku_is_not_a_key(text: str) -> None:
    assert spans(text) == []


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ('create_engine("postgresql+psycopg://etl:ILovePepper87?@10.0.3.7/warehouse")', "ILovePepper87?"),
        ("smtp+tls://mailer:Kaffee?bohne56@smtp.acme.test:587", "Kaffee?bohne56"),
        ("postgres://u:Ab#c?d@e9@db/x", "Ab#c?d@e9"),
    ],
)
def test_a_url_password_runs_to_the_last_at_before_the_host(text: str, password: str) -> None:
    assert [v for _, v in spans(text)] == [password]


def test_a_port_then_a_query_holding_an_address_is_not_a_password() -> None:
    assert spans("see https://host.acme.test:8080?next=bob@acme.test") == []
