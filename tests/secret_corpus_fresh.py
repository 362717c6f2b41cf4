"""A larger secret corpus, freshly generated on every run and split into `dev` and `test`.

`tests/secret_corpus.py` is the small fixed corpus the detector was built against. This one measures how it
generalizes: its cases come from the providers' documented token formats and from how people write secrets
in chat, config and logs, not from the detector's rules, and its values are drawn anew on every run (prefix,
length, alphabet and checksum right), so nothing can be tuned to one fixed string.

- The run's seed is `LOOPMEM_SECRET_CORPUS_SEED` (an integer) if set, else random; it is `SEED`, and a
  failing run is reproduced by setting the variable to it. Each case draws from its own generator seeded with
  (seed, case id), so adding a case does not move the others.
- Secrets are split by kind (all of a kind's cases on one side, about 60 % of kinds in `dev`), by a stable hash
  of the kind name: the `test` split holds kinds the detector was not tuned on. Look-alikes are split 60/40 by
  a stable hash of their id.
- Well-known prefixes are joined at run time ("gh" + "p_" ...), so this file holds no whole token a
  push-protection scanner would stop.

Decisions on ambiguous cases:
- Well-known default or placeholder passwords (`changeme`, `password`, `hunter2`, `admin`) are in neither
  set: whether they are a secret depends on context no corpus line can settle.
- Example keys published by a provider are in neither set (the fixed corpus counts AWS's as a secret).
- Values meant to be public by their provider's documentation are look-alikes: Stripe/Clerk publishable keys,
  Mapbox `pk.` tokens, Algolia search-only keys, reCAPTCHA site keys, Sentry DSNs (the DSN's key is public),
  public keys of every kind. Masked values (`sk_live_••••4242`) are look-alikes.
- A key id that is an identifier only (Twilio's `SK`/`AC` SIDs) is in neither set; an AWS access key id is a
  secret (it is half a credential and is what scanners and AWS itself treat as leaked).
- A secret's recorded substring is the credential itself: the password in a URL (not the URL), the whole URL
  for webhook URLs (the URL is the credential), the whole PEM block for private keys, the value after
  `Bearer`/`Basic`.
- Human passwords may end in a symbol (`Sommer1987!`); templates never put sentence punctuation right after
  them except a comma or a space. No password ends in `.`, `,`, `;` or `:`.
- Any run of 13 to 19 digits in a look-alike fails the Luhn check, so no look-alike is a valid card number
  by accident.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import random
import re
import string
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from mnemonic import Mnemonic

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALPHA = UPPER + LOWER
ALNUM = UPPER + LOWER + DIGITS
LOWER_ALNUM = LOWER + DIGITS
UPPER_ALNUM = UPPER + DIGITS
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
BASE32 = UPPER + "234567"
BASE62 = DIGITS + UPPER + LOWER

R = random.Random
Make = Callable[[R], str]
Template = str | Callable[[R], str]


def _seed_from_env() -> int:
    raw = os.environ.get("LOOPMEM_SECRET_CORPUS_SEED", "").strip()
    return int(raw) if raw else random.SystemRandom().randrange(1, 2**31)


SEED = _seed_from_env()


# --- Value helpers -------------------------------------------------------------------------------------------


def tok(rng: R, alphabet: str, n: int) -> str:
    """n characters of alphabet; 20+ characters from a mixed alphabet hold each class, as real keys do."""
    classes = [c for c in (UPPER, LOWER, DIGITS) if set(c) & set(alphabet)]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if n < 20 or all(set(value) & set(c) for c in classes):
            return value


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def luhn_complete(rng: R, prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice(DIGITS) for _ in range(length - len(prefix) - 1))
    for check in DIGITS:
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


def luhn_broken(rng: R, prefix: str, length: int) -> str:
    good = luhn_complete(rng, prefix, length)
    return good[:-1] + str((int(good[-1]) + rng.randrange(1, 10)) % 10)


def not_luhn(digits: str) -> str:
    """The same digits, last one changed if needed so the run fails the Luhn check."""
    return digits if not luhn_ok(digits) else digits[:-1] + str((int(digits[-1]) + 1) % 10)


_CARD_RUN = re.compile(r"(?<![\d])\d(?:[ -]?\d){12,18}(?![\d])")


def card_like_runs(text: str) -> list[str]:
    """Runs of 13 to 19 digits, single spaces or dashes between them allowed: what a card number looks like."""
    return [re.sub(r"[ -]", "", m.group()) for m in _CARD_RUN.finditer(text)]


def iban(country: str, bban: str) -> str:
    check = 98 - int("".join(str(int(ch, 36)) for ch in bban + country + "00")) % 97
    return f"{country}{check:02d}{bban}"


def grouped(value: str, size: int = 4, sep: str = " ") -> str:
    return sep.join(value[i : i + size] for i in range(0, len(value), size))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def rbytes(rng: R, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def base62(n: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = BASE62[r] + out
    return out or "0"


def crc_token(rng: R, prefix: str, body_len: int = 30) -> str:
    """GitHub's (and npm's) documented shape: prefix, random base62 body, 6-character base62 CRC32 of it."""
    body = tok(rng, ALNUM, body_len)
    return prefix + body + base62(zlib.crc32(body.encode())).rjust(6, "0")


def uid(rng: R) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def digits(rng: R, n: int, first: str = "123456789") -> str:
    return rng.choice(first) + "".join(rng.choice(DIGITS) for _ in range(n - 1))


def jwt(rng: R, payload: dict[str, object], alg: str = "HS256") -> str:
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64url(json.dumps(payload, separators=(",", ":")).encode())
    sig = b64url(rbytes(rng, 256 if alg.startswith("RS") else 32))
    return f"{header}.{body}.{sig}"


def user_jwt(rng: R) -> str:
    iat = rng.randrange(1_700_000_000, 1_760_000_000)
    return jwt(rng, {"sub": uid(rng), "email": "dana@acme.test", "iat": iat, "exp": iat + 3600})


def pem(rng: R, label: str, lead: str, n_bytes: int, width: int = 64, headers: str = "") -> str:
    body = lead + b64(rbytes(rng, n_bytes))[len(lead) :]
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    head = headers + "\n" if headers else ""
    return f"-----BEGIN {label}-----\n{head}" + "\n".join(lines) + f"\n-----END {label}-----"


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _bech32_polymod(values: list[int]) -> int:
    gen = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if (top >> i) & 1 else 0
    return chk


def _to5(data: bytes) -> list[int]:
    acc = bits = 0
    out: list[int] = []
    for byte in data:
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append((acc >> bits) & 31)
    if bits:
        out.append((acc << (5 - bits)) & 31)
    return out


def bech32(hrp: str, data5: list[int]) -> str:
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    mod = _bech32_polymod(expanded + data5 + [0] * 6) ^ 1
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_BECH32[d] for d in data5 + checksum)


def _words(text: str) -> list[str]:
    return text.split()


# Human passwords: words, names, years and a symbol, the way people choose them.
_WORDS = {
    "en": _words(
        "sunshine dragon monkey football princess shadow summer winter buster charlie pepper ginger coffee "
        "pancake rainbow chelsea liverpool blossom falcon thunder"
    ),
    "de": _words(
        "Sommer Schatz Hase Blume Fussball Sonne Mausi Kaffee Schokolade Bayern Katze Zucker Sternchen "
        "Kaffeebohne Schneeflocke Lieblings Gartenzwerg"
    ),
    "fr": _words(
        "soleil chocolat doudou marseille loulou amour papillon bisous fleur chouchou nounours framboise coquelicot"
    ),
    "es": _words("tequiero corazon princesa barcelona futbol mariposa estrella chocolate gatito amor girasol tortuga"),
}
_NAMES = _words("Bella Max Luna Lucas Emma Noah Mia Leo Sofia Hugo Lina Paul Chloe Mateo Jonas Ines")
_LEET = str.maketrans({"o": "0", "e": "3", "a": "@", "i": "1", "s": "$"})


def human_password(rng: R, lang: str) -> str:
    while True:
        word = rng.choice(_WORDS[lang])
        year = str(rng.randrange(1958, 2025))
        sym = rng.choice("!#$%&*?@+")
        pattern = rng.randrange(7)
        if pattern == 0:
            value = word.capitalize() + year + sym
        elif pattern == 1:
            value = rng.choice(_NAMES) + sym + rng.choice(_NAMES) + year[2:]
        elif pattern == 2:
            value = word.lower().translate(_LEET).capitalize() + str(rng.randrange(10, 9999))
        elif pattern == 3:
            value = "-".join(rng.sample(_WORDS[lang], 3)).lower() + "-" + str(rng.randrange(10, 99))
        elif pattern == 4:
            value = rng.choice(_NAMES) + f"{rng.randrange(1, 29):02d}{rng.randrange(1, 13):02d}" + year[2:]
        elif pattern == 5:
            value = word.capitalize() + sym + rng.choice(_WORDS[lang]).lower() + str(rng.randrange(1, 99))
        else:
            love = {"en": "ILove", "de": "IchLiebe", "fr": "Jtm", "es": "TeAmo"}[lang]
            value = love + word.capitalize() + year[2:] + sym
        if len(value) >= 8 and value[-1] not in ".,;:" and " " not in value:
            return value


def passphrase(rng: R) -> str:
    return " ".join(
        rng.sample(
            _words(
                "velvet orbit canyon lamp maple ribbon quartz lantern cobalt meadow harbor pickle tundra violin saddle"
            ),
            4,
        )
    )


# Words people pick for a diceware-style passphrase, by language: concrete nouns, as generators draw them.
_PASSPHRASE_WORDS = {
    "en": _words(
        "tundra biscuit meadow saffron falcon walnut marmot pebble lantern orchid glacier cobalt ember thistle "
        "juniper harbor quiver nimbus paddle velvet sparrow cactus mango oyster plume fjord crater almond willow "
        "hazel banjo kettle ginger prism comet badger lagoon tulip anvil cedar dune gravel hornet igloo jasper "
        "kayak lemur maple nectar otter pixel quartz raven salmon tiger vortex wombat yarrow zephyr"
    ),
    "de": _words(
        "tanne wolke kaffee fenster igel birke nebel kompass ziegel laterne möwe pfeffer schnecke gurke ahorn "
        "brezel dachs eule falke garten hafen insel kiesel lupine marder nadel pilz quelle rabe sattel tinte ufer "
        "veilchen zitrone anker becher dattel erbse fichte hummel"
    ),
    "fr": _words(
        "lapin orage cerise montagne bougie citron falaise grenouille hibou jonquille kiwi lavande marron "
        "noisette olive pivoine renard sapin tortue valise abricot baleine castor dauphin figue girafe hamac iris "
        "jasmin mouette navet oursin"
    ),
    "es": _words(
        "gato nube río limón arena bosque delfín espiga faro girasol higo isla jazmín lago mango nácar olivo "
        "pino queso rana sauce tigre uva vela zorro almendra búho cometa dátil"
    ),
}


def passphrase_words(lang: str, sep: str = " ", title: bool = False) -> Make:
    """A passphrase of 4 to 6 random words (3 to 5 when joined by a hyphen or a dot), told unquoted."""

    def make(rng: R) -> str:
        n = rng.randrange(4, 7) if sep == " " else rng.randrange(3, 6)
        words = rng.sample(_PASSPHRASE_WORDS[lang], n)
        return sep.join(word.capitalize() if title else word for word in words)

    return make


@functools.cache
def _bip39() -> Mnemonic:
    return Mnemonic("english")


def seed_phrase(words: int) -> Make:
    """A wallet's BIP39 seed phrase of `words` words (128 to 256 bits of entropy, checksum included)."""

    def make(rng: R) -> str:
        return _bip39().to_mnemonic(rbytes(rng, words * 4 // 3))

    return make


def numbered(make: Make) -> Make:
    """The phrase as a wallet shows it: one numbered word per line."""

    def numbered_make(rng: R) -> str:
        return "\n".join(f"{i}. {word}" for i, word in enumerate(make(rng).split(), 1))

    return numbered_make


def pin(rng: R, n: int = 4) -> str:
    while True:
        value = "".join(rng.choice(DIGITS) for _ in range(n))
        if len(set(value)) > 1:
            return value


# --- National ids ----------------------------------------------------------------------------------------------


def ssn(rng: R) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randrange(1, 100):02d}-{rng.randrange(1, 10000):04d}"


def nino(rng: R) -> str:
    first = rng.choice([c for c in UPPER if c not in "DFIQUV"])
    second = rng.choice([c for c in UPPER if c not in "DFIOQUV"])
    if first + second in {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}:
        return nino(rng)
    num = "".join(rng.choice(DIGITS) for _ in range(6))
    return f"{first}{second} {num[:2]} {num[2:4]} {num[4:]} {rng.choice('ABCD')}"


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def dni(rng: R) -> str:
    n = rng.randrange(10_000_000, 99_999_999)
    return f"{n:08d}{_DNI_LETTERS[n % 23]}"


def nie(rng: R) -> str:
    lead = rng.choice("XYZ")
    n = rng.randrange(0, 9_999_999)
    return f"{lead}{n:07d}{_DNI_LETTERS[int(str('XYZ'.index(lead)) + f'{n:07d}') % 23]}"


def nir(rng: R) -> str:
    body = (
        rng.choice("12")
        + f"{rng.randrange(40, 100):02d}{rng.randrange(1, 13):02d}{rng.randrange(1, 96):02d}"
        + f"{rng.randrange(1, 990):03d}{rng.randrange(1, 999):03d}"
    )
    key = 97 - int(body) % 97
    return f"{body[0]} {body[1:3]} {body[3:5]} {body[5:7]} {body[7:10]} {body[10:13]} {key:02d}"


def sin(rng: R) -> str:
    value = luhn_complete(rng, rng.choice("1234567"), 9)
    return f"{value[:3]} {value[3:6]} {value[6:]}"


def bsn(rng: R) -> str:
    while True:
        d = [rng.randrange(10) for _ in range(8)]
        if d[0] == 0:
            continue
        rest = sum(x * w for x, w in zip(d, range(9, 1, -1), strict=True)) % 11
        if rest < 10:
            return "".join(map(str, d)) + str(rest)


def cpf(rng: R) -> str:
    d = [rng.randrange(10) for _ in range(9)]
    for length in (9, 10):
        s = sum(x * w for x, w in zip(d, range(length + 1, 1, -1), strict=True)) % 11
        d.append(0 if s < 2 else 11 - s)
    v = "".join(map(str, d))
    return f"{v[:3]}.{v[3:6]}.{v[6:9]}-{v[9:]}"


def iban_for(rng: R, country: str) -> str:
    def n(k: int) -> str:
        return "".join(rng.choice(DIGITS) for _ in range(k))

    if country == "BE":
        first = n(10)
        check = int(first) % 97 or 97
        return iban("BE", f"{first}{check:02d}")
    bban = {
        "DE": lambda: n(18),
        "GB": lambda: rng.choice(["NWBK", "BARC", "LOYD", "HBUK", "MIDL"]) + n(14),
        "FR": lambda: n(10) + tok(rng, UPPER_ALNUM, 11) + n(2),
        "ES": lambda: n(20),
        "NL": lambda: rng.choice(["ABNA", "INGB", "RABO", "TRIO"]) + n(10),
        "IT": lambda: rng.choice(UPPER) + n(10) + tok(rng, UPPER_ALNUM, 12),
        "CH": lambda: n(5) + tok(rng, UPPER_ALNUM, 12),
        "PL": lambda: n(24),
        "AT": lambda: n(16),
    }[country]()
    return iban(country, bban)


def card(rng: R, brand: str) -> str:
    """A Luhn-valid number of the brand's documented prefix and length, written the way people write it."""
    if brand == "visa":
        return luhn_complete(rng, "4", 16)
    if brand == "mastercard":
        return luhn_complete(rng, rng.choice([str(rng.randrange(51, 56)), str(rng.randrange(2221, 2721))]), 16)
    if brand == "amex":
        return luhn_complete(rng, rng.choice(["34", "37"]), 15)
    if brand == "discover":
        return luhn_complete(rng, rng.choice(["6011", "65", str(rng.randrange(644, 650))]), 16)
    if brand == "jcb":
        return luhn_complete(rng, str(rng.randrange(3528, 3590)), 16)
    if brand == "diners":
        return luhn_complete(rng, "36", 14)
    return luhn_complete(rng, "62", rng.choice([16, 19]))  # unionpay


def spaced_card(value: str, sep: str = " ") -> str:
    if len(value) == 15:
        return sep.join([value[:4], value[4:10], value[10:]])
    if len(value) == 14:
        return sep.join([value[:4], value[4:10], value[10:]])
    return grouped(value, 4, sep)


# --- The cases ---------------------------------------------------------------------------------------------------

SPLIT_DEV_SHARE = 0.6


def _split(key: str) -> str:
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    return "dev" if h < SPLIT_DEV_SHARE else "test"


@dataclass(frozen=True)
class SecretCase:
    id: str
    kind: str
    family: str
    split: str
    text: str
    secret: str


@dataclass(frozen=True)
class LookAlike:
    id: str
    family: str
    split: str
    text: str


SECRET_FAMILIES = (
    "cloud",
    "vcs_registry",
    "chat",
    "payment_provider",
    "ai_provider",
    "messaging",
    "saas_token",
    "devops_token",
    "private_key",
    "jwt",
    "url_credential",
    "auth_header",
    "structured_assignment",
    "prose_password",
    "wallet_seed",
    "payment_card",
    "bank_account",
    "national_id",
)
LOOK_ALIKE_FAMILIES = (
    "identifier",
    "digest",
    "public_key",
    "public_token",
    "encoded_data",
    "env_reference",
    "secret_reference",
    "placeholder",
    "prose_about_secret",
    "number",
    "network",
    "code_name",
    "plain_prose",
)
# The families used for the per-family figures (secrets and look-alikes have their own).
FAMILIES = SECRET_FAMILIES


class _Secrets:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.cases: list[SecretCase] = []
        self.family = ""
        self.kind_family: dict[str, str] = {}

    def add(self, id: str, kind: str, template: Template, make: Make) -> None:
        rng = random.Random(f"{self.seed}:secret:{id}")
        assert self.kind_family.setdefault(kind, self.family) == self.family, kind
        for _ in range(50):
            secret = make(rng)
            text = (template(rng) if callable(template) else template).replace("{s}", secret)
            if text.count(secret) == 1:
                self.cases.append(SecretCase(id, kind, self.family, _split(kind), text, secret))
                return
        raise AssertionError(f"{id}: the secret does not occur exactly once")


def _build_secrets(seed: int) -> list[SecretCase]:
    c = _Secrets(seed)
    add = c.add

    # --- cloud
    c.family = "cloud"
    akia = "AK" + "IA"
    asia = "AS" + "IA"
    add(
        "aws_key_id_chat",
        "aws_access_key_id",
        "Deploy with access key id {s} in us-east-1; the secret is in the vault.",
        lambda r: akia + tok(r, BASE32, 16),
    )
    add(
        "aws_key_id_ini",
        "aws_access_key_id",
        "[ci-deployer]\naws_access_key_id = {s}\nregion = eu-west-1",
        lambda r: akia + tok(r, BASE32, 16),
    )
    add("aws_key_id_temp_env", "aws_access_key_id", "export AWS_ACCESS_KEY_ID={s}", lambda r: asia + tok(r, BASE32, 16))
    add(
        "aws_secret_ini",
        "aws_secret_access_key",
        "[prod]\naws_secret_access_key = {s}\noutput = json",
        lambda r: tok(r, B64, 40),
    )
    add("aws_secret_env", "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY={s}", lambda r: tok(r, B64, 40))
    add(
        "aws_secret_json",
        "aws_secret_access_key",
        '{"Credentials": {"SecretAccessKey": "{s}", "Expiration": "2025-06-01T12:00:00Z"}}',
        lambda r: tok(r, B64, 40),
    )
    add(
        "aws_secret_chat",
        "aws_secret_access_key",
        "ok the secret access key for the backup user is {s} — rotate after",
        lambda r: tok(r, B64, 40),
    )
    add(
        "aws_session_token",
        "aws_session_token",
        "aws_session_token = {s}",
        lambda r: "IQoJb3JpZ2luX2Vj" + tok(r, B64, 340) + "==",
    )
    aiza = "AI" + "za"
    add(
        "gcp_key_url",
        "gcp_api_key",
        "GET https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s}",
        lambda r: aiza + tok(r, URLSAFE, 35),
    )
    add("gcp_key_chat", "gcp_api_key", "use the Gemini key {s} for the eval run", lambda r: aiza + tok(r, URLSAFE, 35))
    add("gcp_key_env", "gcp_api_key", "GOOGLE_API_KEY={s}", lambda r: aiza + tok(r, URLSAFE, 35))

    def sa_json(r: R) -> str:
        return (
            '{"type": "service_account", "project_id": "acme-prod-'
            + str(r.randrange(100, 999))
            + '", "private_key_id": "'
            + tok(r, HEX, 40)
            + '", "private_key": "{s}", '
            '"client_email": "deployer@acme-prod.iam.gserviceaccount.com"}'
        )

    add(
        "gcp_service_account",
        "gcp_service_account_key",
        sa_json,
        lambda r: pem(r, "PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1210).replace("\n", "\\n") + "\\n",
    )
    add(
        "google_oauth_secret_json",
        "google_oauth_client_secret",
        '{"web": {"client_id": "4815-abc.apps.googleusercontent.com", "client_secret": "{s}"}}',
        lambda r: "GOC" + "SPX-" + tok(r, URLSAFE, 28),
    )
    add(
        "google_oauth_secret_env",
        "google_oauth_client_secret",
        "GOOGLE_CLIENT_SECRET={s}",
        lambda r: "GOC" + "SPX-" + tok(r, URLSAFE, 28),
    )
    add(
        "azure_storage_conn",
        "azure_storage_account_key",
        "DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={s};EndpointSuffix=core.windows.net",
        lambda r: b64(rbytes(r, 64)),
    )
    add(
        "azure_storage_key_chat",
        "azure_storage_account_key",
        "storage account key1 is {s} (key2 is unused)",
        lambda r: b64(rbytes(r, 64)),
    )
    add(
        "azure_sas",
        "azure_sas_signature",
        "https://acme.blob.core.windows.net/exports/a.csv?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2026-01-01T00:00:00Z&spr=https&sig={s}",
        lambda r: b64(rbytes(r, 32)).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
    )
    azure_secret_chars = ALNUM + "_~.-"
    add(
        "azure_client_secret_env",
        "azure_ad_client_secret",
        "AZURE_CLIENT_SECRET={s}",
        lambda r: tok(r, ALNUM, 3) + "8Q~" + tok(r, azure_secret_chars, 34),
    )
    add(
        "azure_client_secret_chat",
        "azure_ad_client_secret",
        "The app registration secret is {s} and expires in 2026",
        lambda r: tok(r, ALNUM, 3) + "8Q~" + tok(r, azure_secret_chars, 34),
    )
    add(
        "azure_service_bus",
        "azure_shared_access_key",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}",
        lambda r: b64(rbytes(r, 32)),
    )
    add(
        "alibaba_id",
        "alibaba_access_key_id",
        "Alibaba Cloud AccessKey ID: {s}",
        lambda r: "LT" + "AI" + tok(r, ALNUM, 20),
    )
    add(
        "alibaba_secret",
        "alibaba_access_key_secret",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET={s}",
        lambda r: tok(r, ALNUM, 30),
    )
    add(
        "do_token_cli",
        "digitalocean_token",
        "doctl auth init --access-token {s}",
        lambda r: "do" + "p_v1_" + tok(r, HEX, 64),
    )
    add("do_token_env", "digitalocean_token", "DIGITALOCEAN_TOKEN={s}", lambda r: "do" + "p_v1_" + tok(r, HEX, 64))
    add(
        "do_oauth",
        "digitalocean_oauth_token",
        "oauth token from the DO app flow: {s}",
        lambda r: "do" + "o_v1_" + tok(r, HEX, 64),
    )
    add("tencent_id", "tencent_secret_id", "TENCENTCLOUD_SECRET_ID={s}", lambda r: "AK" + "ID" + tok(r, ALNUM, 32))
    add("ibm_key", "ibm_cloud_api_key", '"apikey": "{s}",', lambda r: tok(r, URLSAFE, 44))
    add("scaleway_secret", "scaleway_secret_key", "SCW_SECRET_KEY={s}", uid)
    add("linode_token", "linode_token", "linode-cli configure --token {s}", lambda r: tok(r, HEX, 64))
    add(
        "fcm_server_key",
        "firebase_fcm_server_key",
        "curl -H 'Authorization: key={s}' https://fcm.googleapis.com/fcm/send",
        lambda r: "AAAA" + tok(r, URLSAFE, 7) + ":APA91b" + tok(r, URLSAFE, 134),
    )

    # --- VCS and package registries
    c.family = "vcs_registry"
    add(
        "ghp_chat",
        "github_classic_pat",
        "Push failed until I set GH_TOKEN to {s} on the runner.",
        lambda r: crc_token(r, "gh" + "p_"),
    )
    add(
        "ghp_remote",
        "github_classic_pat",
        "git remote set-url origin https://{s}@github.com/acme/api.git",
        lambda r: crc_token(r, "gh" + "p_"),
    )
    add("ghp_yaml", "github_classic_pat", "github:\n  token: {s}\n  org: acme", lambda r: crc_token(r, "gh" + "p_"))
    add(
        "gh_fine_grained",
        "github_fine_grained_pat",
        "The fine-grained token {s} only has contents:read.",
        lambda r: "github" + "_pat_" + tok(r, UPPER_ALNUM, 22) + "_" + tok(r, ALNUM, 59),
    )
    add(
        "gh_fine_grained_env",
        "github_fine_grained_pat",
        "GITHUB_TOKEN={s}",
        lambda r: "github" + "_pat_" + tok(r, UPPER_ALNUM, 22) + "_" + tok(r, ALNUM, 59),
    )
    add(
        "ghs_log",
        "github_app_token",
        "2024-05-17T10:42:13Z DEBUG installation token issued: {s} expires_in=3600",
        lambda r: crc_token(r, "gh" + "s_"),
    )
    add(
        "gho_chat",
        "github_oauth_token",
        "the oauth app gave me {s}, works with the API",
        lambda r: crc_token(r, "gh" + "o_"),
    )
    add(
        "ghu_json",
        "github_oauth_token",
        '{"access_token": "{s}", "token_type": "bearer"}',
        lambda r: crc_token(r, "gh" + "u_"),
    )
    add(
        "ghr_json",
        "github_refresh_token",
        '{"refresh_token": "{s}", "refresh_token_expires_in": 15897600}',
        lambda r: "gh" + "r_" + tok(r, ALNUM, 76),
    )
    add(
        "glpat_chat",
        "gitlab_pat",
        "Clone with the personal token {s} (expires in May).",
        lambda r: "gl" + "pat-" + tok(r, URLSAFE, 20),
    )
    add(
        "glpat_header",
        "gitlab_pat",
        "curl --header 'PRIVATE-TOKEN: {s}' https://gitlab.com/api/v4/projects",
        lambda r: "gl" + "pat-" + tok(r, URLSAFE, 20),
    )
    add(
        "glrt",
        "gitlab_runner_token",
        "gitlab-runner register --token {s} --url https://gitlab.com",
        lambda r: "gl" + "rt-" + tok(r, URLSAFE, 20),
    )
    add(
        "gldt",
        "gitlab_deploy_token",
        "deploy token for the registry: {s}",
        lambda r: "gl" + "dt-" + tok(r, URLSAFE, 20),
    )
    add(
        "bitbucket",
        "bitbucket_app_password",
        "BITBUCKET_APP_PASSWORD={s}",
        lambda r: "AT" + "BB" + tok(r, ALNUM, 24) + tok(r, HEX, 8).upper(),
    )
    add(
        "npm_npmrc",
        "npm_token",
        "Add this to .npmrc:\n//registry.npmjs.org/:_authToken={s}\nthen run npm publish.",
        lambda r: crc_token(r, "np" + "m_"),
    )
    add("npm_chat", "npm_token", "publish token for the CI is {s}", lambda r: crc_token(r, "np" + "m_"))
    pypi = "py" + "pi-AgEIcHlwaS5vcmc"
    add(
        "pypi_pypirc",
        "pypi_token",
        "[pypi]\nusername = __token__\npassword = {s}",
        lambda r: pypi + tok(r, URLSAFE, 150),
    )
    add("pypi_twine", "pypi_token", "TWINE_PASSWORD={s} twine upload dist/*", lambda r: pypi + tok(r, URLSAFE, 150))
    add(
        "dockerhub_login",
        "docker_hub_pat",
        "echo {s} | docker login -u acmebot --password-stdin",
        lambda r: "dck" + "r_pat_" + tok(r, URLSAFE, 27),
    )
    add(
        "dockerhub_chat",
        "docker_hub_pat",
        "Docker Hub access token: {s}",
        lambda r: "dck" + "r_pat_" + tok(r, URLSAFE, 27),
    )
    add("rubygems", "rubygems_api_key", "---\n:rubygems_api_key: {s}", lambda r: "rubygems" + "_" + tok(r, HEX, 48))
    add(
        "nuget",
        "nuget_api_key",
        "dotnet nuget push pkg.nupkg --api-key {s} --source nuget.org",
        lambda r: "oy2" + tok(r, LOWER_ALNUM, 43),
    )
    add("crates", "crates_io_token", "cargo login {s}", lambda r: "ci" + "o" + tok(r, ALNUM, 32))
    add("artifactory", "artifactory_api_key", "<password>{s}</password>", lambda r: "AK" + "Cp8" + tok(r, ALNUM, 69))

    # --- Chat platforms
    c.family = "chat"

    def slack_bot(r: R) -> str:
        return "xo" + "xb-" + digits(r, 12) + "-" + digits(r, 13) + "-" + tok(r, ALNUM, 24)

    def slack_user(r: R) -> str:
        return "xo" + "xp-" + digits(r, 12) + "-" + digits(r, 12) + "-" + digits(r, 13) + "-" + tok(r, HEX, 32)

    add("slack_bot_chat", "slack_bot_token", "The bot token is {s} for the #alerts channel.", slack_bot)
    add("slack_bot_env", "slack_bot_token", "SLACK_BOT_TOKEN={s}", slack_bot)
    add("slack_user_chat", "slack_user_token", "use my user token {s} to read the history", slack_user)
    add("slack_user_json", "slack_user_token", '{"ok": true, "authed_user": {"access_token": "{s}"}}', slack_user)
    add(
        "slack_app",
        "slack_app_token",
        "SLACK_APP_TOKEN={s}",
        lambda r: "xa" + "pp-1-A" + tok(r, UPPER_ALNUM, 10) + "-" + digits(r, 13) + "-" + tok(r, HEX, 64),
    )

    def slack_hook(r: R) -> str:
        return (
            "https://hooks.slack.com/services/T"
            + tok(r, UPPER_ALNUM, 8)
            + "/B"
            + tok(r, UPPER_ALNUM, 10)
            + "/"
            + tok(r, ALNUM, 24)
        )

    add("slack_webhook_chat", "slack_webhook_url", "Post alerts to {s} from the cron job.", slack_hook)
    add("slack_webhook_yaml", "slack_webhook_url", "alertmanager:\n  slack_api_url: '{s}'", slack_hook)

    def discord_bot(r: R) -> str:
        snowflake = str(r.randrange(10**17, 10**19)).encode()
        return b64url(snowflake) + "." + tok(r, URLSAFE, 6) + "." + tok(r, URLSAFE, 38)

    add("discord_bot_code", "discord_bot_token", 'client.run("{s}")', discord_bot)
    add("discord_bot_chat", "discord_bot_token", "Discord bot login: {s}", discord_bot)
    add(
        "discord_webhook",
        "discord_webhook_url",
        "webhook for #deploys: {s}",
        lambda r: f"https://discord.com/api/webhooks/{digits(r, 19)}/" + tok(r, URLSAFE, 68),
    )

    def telegram(r: R) -> str:
        return digits(r, r.choice([9, 10])) + ":AA" + tok(r, URLSAFE, 33)

    add("telegram_chat", "telegram_bot_token", "BotFather says: Use this token to access the HTTP API: {s}", telegram)
    add("telegram_url", "telegram_bot_token", "curl https://api.telegram.org/bot{s}/getUpdates", telegram)

    # --- Payment providers
    c.family = "payment_provider"
    add(
        "stripe_live_chat",
        "stripe_secret_key",
        "Charge with {s} in production only.",
        lambda r: "sk" + "_live_" + tok(r, ALNUM, 24),
    )
    add(
        "stripe_live_env", "stripe_secret_key", "STRIPE_SECRET_KEY={s}", lambda r: "sk" + "_live_51" + tok(r, ALNUM, 97)
    )
    add(
        "stripe_restricted",
        "stripe_restricted_key",
        "restricted key (read-only charges): {s}",
        lambda r: "rk" + "_live_51" + tok(r, ALNUM, 97),
    )
    add(
        "stripe_whsec",
        "stripe_webhook_secret",
        "STRIPE_WEBHOOK_SECRET={s}",
        lambda r: "wh" + "sec_" + tok(r, ALNUM, 32),
    )
    add(
        "square_token",
        "square_access_token",
        "Square production access token {s}",
        lambda r: "EA" + "AA" + tok(r, URLSAFE, 60),
    )
    add(
        "square_oauth",
        "square_oauth_secret",
        "Square OAuth application secret: {s}",
        lambda r: "sq0" + "csp-" + tok(r, URLSAFE, 43),
    )
    add(
        "braintree",
        "braintree_access_token",
        "BRAINTREE_ACCESS_TOKEN={s}",
        lambda r: "access_token" + "$production$" + tok(r, LOWER_ALNUM, 16) + "$" + tok(r, HEX, 32),
    )
    add("shippo", "shippo_api_token", "Authorization: ShippoToken {s}", lambda r: "shippo" + "_live_" + tok(r, HEX, 40))
    add(
        "easypost",
        "easypost_api_key",
        "EasyPost::Client.new(api_key: '{s}')",
        lambda r: "EZ" + "AK" + tok(r, ALNUM, 54),
    )
    add("plaid", "plaid_secret", "PLAID_SECRET={s}", lambda r: tok(r, HEX, 30))
    add(
        "paypal",
        "paypal_client_secret",
        "paypal:\n  client_id: AcmeShopLive\n  client_secret: {s}",
        lambda r: "E" + tok(r, URLSAFE, 79),
    )

    # --- AI providers
    c.family = "ai_provider"
    add(
        "anthropic_env",
        "anthropic_api_key",
        "export ANTHROPIC_API_KEY={s}",
        lambda r: "sk" + "-ant-api03-" + tok(r, URLSAFE, 93) + "AA",
    )
    add(
        "anthropic_chat",
        "anthropic_api_key",
        "Claude calls use {s} from the team account",
        lambda r: "sk" + "-ant-api03-" + tok(r, URLSAFE, 93) + "AA",
    )
    add(
        "anthropic_admin",
        "anthropic_admin_key",
        "admin key for usage reports: {s}",
        lambda r: "sk" + "-ant-admin01-" + tok(r, URLSAFE, 93) + "AA",
    )
    oai = "T3Blbk" + "FJ"
    add(
        "openai_proj_code",
        "openai_api_key",
        'client = OpenAI(api_key="{s}")',
        lambda r: "sk" + "-proj-" + tok(r, URLSAFE, 74) + oai + tok(r, URLSAFE, 74),
    )
    add(
        "openai_proj_chat",
        "openai_api_key",
        "here's the openai key {s} don't commit it",
        lambda r: "sk" + "-proj-" + tok(r, URLSAFE, 74) + oai + tok(r, URLSAFE, 74),
    )
    add(
        "openai_svcacct",
        "openai_api_key",
        "OPENAI_API_KEY={s}",
        lambda r: "sk" + "-svcacct-" + tok(r, URLSAFE, 74) + oai + tok(r, URLSAFE, 74),
    )
    add("hf_env", "huggingface_token", "HF_TOKEN={s}", lambda r: "h" + "f_" + tok(r, ALPHA, 34))
    add("hf_cli", "huggingface_token", "huggingface-cli login --token {s}", lambda r: "h" + "f_" + tok(r, ALPHA, 34))
    add("groq", "groq_api_key", "GROQ_API_KEY={s}", lambda r: "gs" + "k_" + tok(r, ALNUM, 52))
    add("replicate", "replicate_api_token", "replicate token {s}", lambda r: "r" + "8_" + tok(r, ALNUM, 37))
    add("cohere", "cohere_api_key", 'co = cohere.Client("{s}")', lambda r: tok(r, ALNUM, 40))
    add("mistral", "mistral_api_key", "MISTRAL_API_KEY={s}", lambda r: tok(r, ALNUM, 32))
    add("perplexity", "perplexity_api_key", "Authorization: Bearer {s}", lambda r: "pp" + "lx-" + tok(r, ALNUM, 48))
    add("xai", "xai_api_key", "XAI_API_KEY={s}", lambda r: "xa" + "i-" + tok(r, ALNUM, 80))
    add(
        "langsmith",
        "langsmith_api_key",
        "LANGSMITH_API_KEY={s}",
        lambda r: "lsv2" + "_pt_" + tok(r, HEX, 32) + "_" + tok(r, HEX, 10),
    )
    add("openrouter", "openrouter_api_key", "openrouter key: {s}", lambda r: "sk" + "-or-v1-" + tok(r, HEX, 64))

    # --- Messaging and e-mail
    c.family = "messaging"
    add(
        "sendgrid_chat",
        "sendgrid_api_key",
        "SendGrid mail goes out with {s}.",
        lambda r: "S" + "G." + tok(r, URLSAFE, 22) + "." + tok(r, URLSAFE, 43),
    )
    add(
        "sendgrid_env",
        "sendgrid_api_key",
        "SENDGRID_API_KEY={s}",
        lambda r: "S" + "G." + tok(r, URLSAFE, 22) + "." + tok(r, URLSAFE, 43),
    )
    add(
        "mailgun_legacy",
        "mailgun_api_key",
        "curl -s --user 'api:{s}' https://api.mailgun.net/v3/mg.acme.test/messages",
        lambda r: "key" + "-" + tok(r, HEX, 32),
    )
    add(
        "mailgun_new",
        "mailgun_api_key",
        "MAILGUN_API_KEY={s}",
        lambda r: tok(r, HEX, 32) + "-" + tok(r, HEX, 8) + "-" + tok(r, HEX, 8),
    )
    add("postmark", "postmark_server_token", "X-Postmark-Server-Token: {s}", uid)
    add("twilio_auth", "twilio_auth_token", "TWILIO_AUTH_TOKEN={s}", lambda r: tok(r, HEX, 32))
    add(
        "twilio_auth_chat",
        "twilio_auth_token",
        "twilio auth token is {s}, account is the usual one",
        lambda r: tok(r, HEX, 32),
    )
    add("twilio_key_secret", "twilio_api_key_secret", "twilio:\n  api_key_secret: {s}", lambda r: tok(r, ALNUM, 32))
    add(
        "resend",
        "resend_api_key",
        "const resend = new Resend('{s}');",
        lambda r: "r" + "e_" + tok(r, ALNUM, 8) + "_" + tok(r, ALNUM, 24),
    )
    add(
        "mailchimp",
        "mailchimp_api_key",
        "Newsletter sync uses the Mailchimp key {s}.",
        lambda r: tok(r, HEX, 32) + "-us" + str(r.randrange(1, 21)),
    )
    add("brevo", "brevo_api_key", "api-key: {s}", lambda r: "xkey" + "sib-" + tok(r, HEX, 64) + "-" + tok(r, ALNUM, 16))

    # --- SaaS platforms
    c.family = "saas_token"
    add("shpat", "shopify_access_token", "X-Shopify-Access-Token: {s}", lambda r: "sh" + "pat_" + tok(r, HEX, 32))
    add(
        "shpat_chat",
        "shopify_access_token",
        "admin API token for the store is {s}",
        lambda r: "sh" + "pat_" + tok(r, HEX, 32),
    )
    add("shpss", "shopify_shared_secret", "SHOPIFY_API_SECRET={s}", lambda r: "sh" + "pss_" + tok(r, HEX, 32))
    add("shpca", "shopify_custom_app_token", "custom app token: {s}", lambda r: "sh" + "pca_" + tok(r, HEX, 32))
    add(
        "atlassian",
        "atlassian_api_token",
        "JIRA_API_TOKEN={s}",
        lambda r: "ATA" + "TT3xFfGF0" + tok(r, URLSAFE, 172) + "=" + tok(r, HEX, 8).upper(),
    )
    add(
        "atlassian_curl",
        "atlassian_api_token",
        "curl -u dana@acme.test:{s} https://acme.atlassian.net/rest/api/3/myself",
        lambda r: "ATA" + "TT3xFfGF0" + tok(r, URLSAFE, 172) + "=" + tok(r, HEX, 8).upper(),
    )
    add("linear", "linear_api_key", "LINEAR_API_KEY={s}", lambda r: "lin" + "_api_" + tok(r, ALNUM, 40))
    add("linear_chat", "linear_api_key", "new linear key: {s}", lambda r: "lin" + "_api_" + tok(r, ALNUM, 40))
    add("notion_secret", "notion_integration_token", "NOTION_TOKEN={s}", lambda r: "sec" + "ret_" + tok(r, ALNUM, 43))
    add(
        "notion_ntn",
        "notion_integration_token",
        "Internal integration secret: {s}",
        lambda r: "nt" + "n_" + digits(r, 11) + tok(r, ALNUM, 35),
    )
    add("airtable", "airtable_pat", "AIRTABLE_API_KEY={s}", lambda r: "pat" + tok(r, ALNUM, 14) + "." + tok(r, HEX, 64))
    add(
        "hubspot",
        "hubspot_private_app_token",
        "Authorization: Bearer {s}",
        lambda r: "pat" + "-" + r.choice(["na1", "eu1"]) + "-" + uid(r),
    )

    def mapbox_secret(r: R) -> str:
        user = b64url(json.dumps({"u": "acme-maps", "a": tok(r, LOWER_ALNUM, 25)}, separators=(",", ":")).encode())
        return "sk." + user + "." + tok(r, URLSAFE, 22)

    add("mapbox_sk", "mapbox_secret_token", "MAPBOX_DOWNLOADS_TOKEN={s}", mapbox_secret)
    add("algolia_admin", "algolia_admin_key", "ALGOLIA_ADMIN_API_KEY={s}", lambda r: tok(r, HEX, 32))
    add(
        "algolia_admin_code",
        "algolia_admin_key",
        "client = SearchClient.create('ACME1234', '{s}')  # admin key",
        lambda r: tok(r, HEX, 32),
    )
    add("clerk", "clerk_secret_key", "CLERK_SECRET_KEY={s}", lambda r: "sk" + "_live_" + tok(r, ALNUM, 42))
    add("twitch", "twitch_oauth_token", "PASS oauth:{s}", lambda r: tok(r, LOWER_ALNUM, 30))
    add("twitch_secret", "twitch_client_secret", "TWITCH_CLIENT_SECRET={s}", lambda r: tok(r, LOWER_ALNUM, 30))
    add("figma", "figma_pat", "X-Figma-Token: {s}", lambda r: "fig" + "d_" + tok(r, URLSAFE, 40))
    add(
        "asana",
        "asana_pat",
        "ASANA_ACCESS_TOKEN={s}",
        lambda r: f"2/{digits(r, 16)}/{digits(r, 16)}:" + tok(r, HEX, 32),
    )
    add(
        "postman", "postman_api_key", "x-api-key: {s}", lambda r: "PM" + "AK-" + tok(r, HEX, 24) + "-" + tok(r, HEX, 34)
    )
    add("snyk", "snyk_token", "SNYK_TOKEN={s}", uid)
    add("okta", "okta_api_token", "Authorization: SSWS {s}", lambda r: "00" + tok(r, URLSAFE, 40))
    add("dropbox", "dropbox_access_token", "dropbox token {s}", lambda r: "s" + "l." + tok(r, URLSAFE, 138))

    # --- Developer and infrastructure platforms
    c.family = "devops_token"
    add(
        "vault_env", "vault_token", "VAULT_TOKEN={s} vault kv get secret/app", lambda r: "hv" + "s." + tok(r, ALNUM, 24)
    )
    add("vault_long", "vault_token", "vault login {s}", lambda r: "hv" + "s.CAESI" + tok(r, URLSAFE, 86))
    add("vault_batch", "vault_token", "batch token: {s}", lambda r: "hv" + "b.AAAAAQ" + tok(r, URLSAFE, 110))
    add(
        "tfc_rc",
        "terraform_cloud_token",
        'credentials "app.terraform.io" {\n  token = "{s}"\n}',
        lambda r: tok(r, ALNUM, 14) + ".atlas" + "v1." + tok(r, URLSAFE, 67),
    )
    add("pulumi", "pulumi_access_token", "PULUMI_ACCESS_TOKEN={s}", lambda r: "pu" + "l-" + tok(r, HEX, 40))
    add("doppler_pt", "doppler_token", "doppler configure set token {s}", lambda r: "dp" + ".pt." + tok(r, ALNUM, 43))
    add("doppler_st", "doppler_token", "DOPPLER_TOKEN={s}", lambda r: "dp" + ".st.prd." + tok(r, ALNUM, 43))
    add(
        "grafana_sa",
        "grafana_service_account_token",
        "GRAFANA_TOKEN={s}",
        lambda r: "gl" + "sa_" + tok(r, ALNUM, 32) + "_" + tok(r, HEX, 8),
    )

    def grafana_cloud(r: R) -> str:
        body = {"o": digits(r, 6), "n": f"stack-{digits(r, 6)}-hm-write", "k": tok(r, ALNUM, 24), "m": {"r": "eu"}}
        return "gl" + "c_" + b64(json.dumps(body, separators=(",", ":")).encode())

    add("grafana_cloud", "grafana_cloud_token", "password: {s}", grafana_cloud)

    def sentry_org(r: R) -> str:
        body = {
            "iat": r.randrange(1_700_000_000, 1_760_000_000),
            "url": "https://sentry.io",
            "region_url": "https://us.sentry.io",
            "org": "acme",
        }
        return "sntr" + "ys_" + b64(json.dumps(body, separators=(",", ":")).encode()) + "_" + tok(r, B64, 43)

    add("sentry_org", "sentry_auth_token", "SENTRY_AUTH_TOKEN={s}", sentry_org)
    add(
        "sentry_user",
        "sentry_auth_token",
        "sentry-cli --auth-token {s} releases new 1.4.2",
        lambda r: "sntr" + "yu_" + tok(r, HEX, 64),
    )
    add(
        "newrelic_user", "new_relic_user_key", "NEW_RELIC_API_KEY={s}", lambda r: "NR" + "AK-" + tok(r, UPPER_ALNUM, 27)
    )
    add("newrelic_license", "new_relic_license_key", "license_key: {s}", lambda r: tok(r, HEX, 36) + "NR" + "AL")
    add("datadog_api", "datadog_api_key", "DD_API_KEY={s}", lambda r: tok(r, HEX, 32))
    add("datadog_app", "datadog_app_key", "DD-APPLICATION-KEY: {s}", lambda r: tok(r, HEX, 40))
    add("pscale_pw", "planetscale_password", "DATABASE_PASSWORD={s}", lambda r: "psc" + "ale_pw_" + tok(r, URLSAFE, 43))
    add(
        "pscale_tkn",
        "planetscale_token",
        "pscale auth login --service-token {s}",
        lambda r: "psc" + "ale_tkn_" + tok(r, URLSAFE, 43),
    )
    add("supabase_sbp", "supabase_access_token", "SUPABASE_ACCESS_TOKEN={s}", lambda r: "sb" + "p_" + tok(r, HEX, 40))
    add("vercel", "vercel_token", "vercel deploy --prod --token {s}", lambda r: tok(r, ALNUM, 24))
    add("netlify", "netlify_token", "NETLIFY_AUTH_TOKEN={s}", lambda r: "nf" + "p_" + tok(r, ALNUM, 36))
    add("heroku_new", "heroku_api_key", "HEROKU_API_KEY={s}", lambda r: "HR" + "KU-AA" + tok(r, URLSAFE, 58))
    add("heroku_uuid", "heroku_api_key", "heroku auth:token printed {s}", uid)
    add("fly", "flyio_token", "FLY_API_TOKEN={s}", lambda r: "fo" + "1_" + tok(r, URLSAFE, 43))
    add("render", "render_api_key", "Authorization: Bearer {s}", lambda r: "rn" + "d_" + tok(r, ALNUM, 32))
    add("databricks", "databricks_token", "DATABRICKS_TOKEN={s}", lambda r: "da" + "pi" + tok(r, HEX, 32))
    add(
        "databricks_cfg",
        "databricks_token",
        "[DEFAULT]\nhost = https://adb-123.azuredatabricks.net\ntoken = {s}",
        lambda r: "da" + "pi" + tok(r, HEX, 32) + "-2",
    )
    add("cloudflare_token", "cloudflare_api_token", "CLOUDFLARE_API_TOKEN={s}", lambda r: tok(r, URLSAFE, 40))
    add(
        "cloudflare_global",
        "cloudflare_global_api_key",
        "-H 'X-Auth-Email: ops@acme.test' -H 'X-Auth-Key: {s}'",
        lambda r: tok(r, HEX, 37),
    )

    def op_token(r: R) -> str:
        body = {
            "signInAddress": "my.1password.com",
            "userAuth": {
                "method": "SRPg-4096",
                "alg": "PBES2g-HS256",
                "iterations": 650000,
                "salt": tok(r, URLSAFE, 22),
            },
            "email": f"{tok(r, LOWER, 26)}@1passwordserviceaccounts.com",
            "srpX": tok(r, HEX, 64),
            "muk": {"alg": "A256GCM", "ext": True, "k": tok(r, URLSAFE, 43), "kty": "oct"},
            "secretKey": "A3-" + tok(r, UPPER_ALNUM, 6),
            "deviceUuid": tok(r, LOWER_ALNUM, 26),
        }
        return "op" + "s_" + b64url(json.dumps(body, separators=(",", ":")).encode())

    add("op_service_account", "onepassword_service_account_token", "OP_SERVICE_ACCOUNT_TOKEN={s}", op_token)
    add(
        "op_secret_key",
        "onepassword_secret_key",
        "my 1Password Secret Key is {s} in case I lose the kit",
        lambda r: (
            "A3-"
            + "-".join([tok(r, UPPER_ALNUM, 6), tok(r, UPPER_ALNUM, 6)] + [tok(r, UPPER_ALNUM, 5) for _ in range(4)])
        ),
    )
    add(
        "circleci",
        "circleci_token",
        "CIRCLE_TOKEN={s}",
        lambda r: "CCI" + "PAT_" + tok(r, ALNUM, 22) + "_" + tok(r, HEX, 40),
    )
    add("buildkite", "buildkite_token", "BUILDKITE_API_TOKEN={s}", lambda r: "bk" + "ua_" + tok(r, HEX, 40))

    # --- Private keys
    c.family = "private_key"
    add(
        "rsa_chat",
        "rsa_private_key",
        "Here is the deploy key:\n{s}\nkeep it safe.",
        lambda r: pem(r, "RSA PRIVATE KEY", "MIIEpAIBAAKCAQEA", 1190),
    )
    add(
        "rsa_yaml",
        "rsa_private_key",
        lambda r: "tls:\n  key: |\n    {s}",
        lambda r: pem(r, "RSA PRIVATE KEY", "MIIEowIBAAKCAQEA", 1180).replace("\n", "\n    "),
    )
    add(
        "pkcs8",
        "pkcs8_private_key",
        "-- server.key --\n{s}",
        lambda r: pem(r, "PRIVATE KEY", "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC", 1210),
    )
    add(
        "pkcs8_encrypted",
        "pkcs8_private_key",
        "{s}\npassphrase is in the other message",
        lambda r: pem(r, "ENCRYPTED PRIVATE KEY", "MIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQww", 1290),
    )
    add("ec_key", "ec_private_key", "{s}", lambda r: pem(r, "EC PRIVATE KEY", "MHcCAQEEI", 121))
    add(
        "ec_truncated",
        "ec_private_key",
        "The key pasted in the ticket was cut off:\n{s}",
        lambda r: pem(r, "EC PRIVATE KEY", "MHcCAQEEI", 121).rsplit("\n", 2)[0],
    )
    openssh_lead = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
    add(
        "openssh_file",
        "openssh_private_key",
        "cat ~/.ssh/id_ed25519\n{s}",
        lambda r: pem(r, "OPENSSH PRIVATE KEY", openssh_lead, 300, width=70),
    )
    add(
        "openssh_json",
        "openssh_private_key",
        '{"ssh_key": "{s}"}',
        lambda r: pem(r, "OPENSSH PRIVATE KEY", openssh_lead, 300, width=70).replace("\n", "\\n"),
    )
    add(
        "pgp_private",
        "pgp_private_key",
        "my signing key, import it on the new laptop:\n{s}",
        lambda r: pem(r, "PGP PRIVATE KEY BLOCK", "lQdGBG", 900, headers="Comment: backup\n").replace(
            "\n-----END", "\n=" + tok(r, B64, 4) + "\n-----END"
        ),
    )

    def putty(r: R) -> str:
        return (
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@acme\nPublic-Lines: 1\n"
            + "AAAAC3NzaC1lZDI1NTE5AAAAI"
            + tok(r, B64, 43)
            + "\nPrivate-Lines: 1\n"
            + tok(r, B64, 44)
            + "\nPrivate-MAC: "
            + tok(r, HEX, 64)
        )

    add("putty", "putty_private_key", "{s}", putty)
    add(
        "wireguard",
        "wireguard_private_key",
        "[Interface]\nPrivateKey = {s}\nAddress = 10.8.0.2/24",
        lambda r: b64(rbytes(r, 32)),
    )
    add(
        "age_file",
        "age_secret_key",
        "# created: 2024-05-17T10:42:13Z\n# public key: age1...\n{s}",
        lambda r: bech32("age-secret-key-", _to5(rbytes(r, 32))).upper(),
    )
    add(
        "age_chat",
        "age_secret_key",
        "sops key for staging: {s}",
        lambda r: bech32("age-secret-key-", _to5(rbytes(r, 32))).upper(),
    )

    # --- JWTs
    c.family = "jwt"
    add("jwt_bearer", "jwt_bearer", "curl -H 'Authorization: Bearer {s}' https://api.acme.test/me", user_jwt)
    add("jwt_cookie", "jwt_cookie", "Cookie: session={s}; Path=/; HttpOnly", user_jwt)
    add("jwt_response", "jwt_in_json", lambda r: '{"access_token": "{s}", "expires_in": 3600}', user_jwt)
    add("jwt_refresh_log", "jwt_in_json", "INFO token refresh ok refresh_token={s} user=42", user_jwt)

    def service_role(r: R) -> str:
        iat = r.randrange(1_650_000_000, 1_720_000_000)
        return jwt(
            r,
            {"iss": "supabase", "ref": tok(r, LOWER, 20), "role": "service_role", "iat": iat, "exp": iat + 315_360_000},
        )

    add("supabase_service_role", "supabase_service_role_key", "SUPABASE_SERVICE_ROLE_KEY={s}", service_role)

    def id_token(r: R) -> str:
        return jwt(
            r,
            {
                "iss": "https://accounts.google.com",
                "aud": "4815.apps.googleusercontent.com",
                "sub": digits(r, 21),
                "email": "dana@acme.test",
                "exp": 1_893_456_000,
            },
            alg="RS256",
        )

    add("id_token_query", "jwt_in_url", "https://app.acme.test/callback#id_token={s}&state=af0ifjsldkj", id_token)
    add("jwt_magic_link", "jwt_in_url", "Magic link: https://app.acme.test/login?token={s}", user_jwt)

    # --- Credentials in URLs (the secret is the password)
    c.family = "url_credential"
    add(
        "pg_url",
        "database_url_password",
        "DATABASE_URL=postgres://app:{s}@db.internal:5432/app",
        lambda r: tok(r, ALNUM, 18),
    )
    add(
        "pg_sqlalchemy",
        "database_url_password",
        'engine = create_engine("postgresql+psycopg://etl:{s}@10.0.3.7/warehouse")',
        lambda r: human_password(r, "en"),
    )
    add(
        "mysql_url", "database_url_password", "mysql://root:{s}@127.0.0.1:3306/shop", lambda r: tok(r, ALNUM + "-_", 16)
    )
    add(
        "mongo_srv",
        "mongodb_url_password",
        "MONGO_URI=mongodb+srv://svc-api:{s}@cluster0.ab1cd.mongodb.net/?retryWrites=true",
        lambda r: tok(r, ALNUM, 16),
    )
    add(
        "redis_url",
        "redis_url_password",
        "Cache at redis://:{s}@cache.internal:6379/0 for sessions",
        lambda r: tok(r, ALNUM, 20),
    )
    add(
        "rediss_url",
        "redis_url_password",
        "REDIS_URL=rediss://default:{s}@eu1-fun-bee.upstash.io:6379",
        lambda r: tok(r, ALNUM, 32),
    )
    add("amqp_url", "amqp_url_password", "broker_url = 'amqp://celery:{s}@rabbit:5672//'", lambda r: tok(r, ALNUM, 14))
    add(
        "https_basic",
        "http_basic_auth_url",
        "pip install -i https://ci:{s}@pypi.acme.test/simple acme-lib",
        lambda r: tok(r, ALNUM, 20),
    )
    add(
        "https_basic_encoded",
        "http_basic_auth_url",
        "the feed is at https://dana:{s}@feeds.acme.test/cal.ics",
        lambda r: tok(r, ALNUM, 6) + "%40" + tok(r, ALNUM, 6) + "%21",
    )
    add("ftp_url", "ftp_url_password", "Mirror to ftp://deploy:{s}@files.acme.test/pub", lambda r: tok(r, ALNUM, 9))
    add(
        "smtp_url",
        "smtp_url_password",
        "EMAIL_URL=smtp+tls://mailer:{s}@smtp.acme.test:587",
        lambda r: human_password(r, "de"),
    )
    add(
        "jdbc",
        "jdbc_password_param",
        "jdbc:mysql://db:3306/app?user=app&password={s}&useSSL=true",
        lambda r: tok(r, ALNUM, 14),
    )
    add(
        "git_credentials",
        "git_credential_url",
        "~/.git-credentials:\nhttps://dana:{s}@git.acme.test",
        lambda r: tok(r, HEX, 40),
    )

    # --- Authorization headers and flags
    c.family = "auth_header"
    add("bearer_opaque", "bearer_token", "Authorization: Bearer {s}", lambda r: tok(r, ALNUM, 40))
    add(
        "bearer_log",
        "bearer_token",
        'DEBUG http: headers={"Authorization": "Bearer {s}", "Accept": "*/*"}',
        lambda r: tok(r, URLSAFE, 64),
    )
    add(
        "basic_header",
        "basic_auth_header",
        lambda r: "Authorization: Basic {s}",
        lambda r: b64(f"admin:{human_password(r, 'en')}".encode()),
    )
    add(
        "basic_curl_header",
        "basic_auth_header",
        'curl -H "Authorization: Basic {s}" https://jenkins.acme.test/api/json',
        lambda r: b64(f"ci-bot:{tok(r, ALNUM, 24)}".encode()),
    )
    add("token_header", "token_auth_header", "Authorization: token {s}", lambda r: tok(r, HEX, 40))
    add("x_api_key", "api_key_header", "x-api-key: {s}", lambda r: tok(r, ALNUM, 32))
    add(
        "curl_user",
        "curl_user_password",
        "curl -u admin:{s} https://grafana.acme.test/api/dashboards",
        lambda r: human_password(r, "en"),
    )
    add("query_api_key", "query_string_key", "GET /v1/forecast?lat=52.5&lon=13.4&appid={s}", lambda r: tok(r, HEX, 32))
    add(
        "query_access_token",
        "query_string_key",
        "https://graph.acme.test/me?fields=id&access_token={s}",
        lambda r: tok(r, URLSAFE, 48),
    )

    # --- Generic name = value, where the name says secret and the value is random
    c.family = "structured_assignment"
    add("env_db_password", "env_assignment", "DB_PASSWORD={s}", lambda r: "Xy7#" + tok(r, ALNUM, 12))
    add("env_stripe_key", "env_assignment", "STRIPE_KEY={s}", lambda r: tok(r, ALNUM, 32))
    add("env_signing_secret", "env_assignment", "export SIGNING_SECRET='{s}'", lambda r: tok(r, HEX, 64))
    add("env_session", "env_assignment", 'SESSION_SECRET="{s}"', lambda r: tok(r, B64, 44))
    add(
        "yaml_password",
        "yaml_assignment",
        'smtp:\n  host: mail.internal\n  password: "{s}"',
        lambda r: human_password(r, "en"),
    )
    add(
        "yaml_client_credential",
        "yaml_assignment",
        "oauth:\n  client_id: reporting\n  client_credential: {s}",
        lambda r: tok(r, URLSAFE, 40),
    )
    add(
        "yaml_passphrase",
        "yaml_assignment",
        "backup:\n  encryption_passphrase: {s}\n  schedule: daily",
        lambda r: tok(r, ALNUM + "!@#%", 28),
    )
    add(
        "json_password",
        "json_assignment",
        lambda r: '{"username": "admin", "password": "{s}"}',
        lambda r: human_password(r, "en"),
    )
    add(
        "json_api_secret",
        "json_assignment",
        '{"api_key": "pub-123", "api_secret": "{s}"}',
        lambda r: tok(r, URLSAFE, 43),
    )
    add(
        "json_nested",
        "json_assignment",
        '{"db": {"host": "10.0.0.5", "credentials": {"pass": "{s}"}}}',
        lambda r: tok(r, ALNUM, 20),
    )
    add("py_code", "code_assignment", 'db_password = "{s}"', lambda r: tok(r, ALNUM, 16))
    add("js_code", "code_assignment", "const webhookSecret = '{s}';", lambda r: tok(r, URLSAFE, 32))
    add("go_code", "code_assignment", 'var jwtSecret = []byte("{s}")', lambda r: tok(r, ALNUM, 32))
    add(
        "php_define",
        "code_assignment",
        "define('AUTH_KEY', '{s}');",
        lambda r: tok(r, ALNUM + "!@#$%^&*()-_[]{}<>~+=,.;:/?|", 64),
    )
    add(
        "ini_password",
        "ini_toml_assignment",
        "[database]\nuser = app\npassword = {s}\nport = 5432",
        lambda r: tok(r, ALNUM, 18),
    )
    add("toml_token", "ini_toml_assignment", '[registry]\nauth_token = "{s}"', lambda r: tok(r, URLSAFE, 40))
    add("xml_password", "xml_assignment", '<add key="SmtpPassword" value="{s}" />', lambda r: tok(r, ALNUM, 16))
    add(
        "xml_element",
        "xml_assignment",
        "<server>\n  <id>nexus</id>\n  <password>{s}</password>\n</server>",
        lambda r: tok(r, ALNUM, 20),
    )
    add("spring", "properties_assignment", "spring.datasource.password={s}", lambda r: tok(r, ALNUM, 16))
    add("properties_key", "properties_assignment", "mail.smtp.auth.secret = {s}", lambda r: tok(r, ALNUM, 24))
    add(
        "mysql_p",
        "cli_password_flag",
        "mysql -h db.internal -u root -p{s} shop < dump.sql",
        lambda r: tok(r, ALNUM, 12),
    )
    add("psql_env", "cli_password_flag", "PGPASSWORD={s} psql -h db.internal -U app", lambda r: tok(r, ALNUM, 16))
    add("sshpass", "cli_password_flag", "sshpass -p '{s}' ssh pi@192.168.1.20", lambda r: human_password(r, "en"))
    add("pgpass", "credential_file_line", "~/.pgpass: db.internal:5432:app:app:{s}", lambda r: tok(r, ALNUM, 18))
    add(
        "netrc",
        "credential_file_line",
        "machine api.heroku.com\n  login dana@acme.test\n  password {s}",
        lambda r: tok(r, HEX, 40),
    )
    add(
        "k8s_stringdata",
        "k8s_secret_manifest",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: {s}",
        lambda r: tok(r, ALNUM, 20),
    )
    add(
        "k8s_data_b64",
        "k8s_secret_manifest",
        "kind: Secret\ntype: Opaque\ndata:\n  api-token: {s}",
        lambda r: b64(tok(r, ALNUM, 30).encode()),
    )
    add(
        "django_secret",
        "framework_secret_key",
        "SECRET_KEY = '{s}'",
        lambda r: tok(r, LOWER + DIGITS + "!@#$%^&*(-_=+)", 50),
    )
    add("rails_secret", "framework_secret_key", "secret_key_base: {s}", lambda r: tok(r, HEX, 128))
    add("laravel_key", "framework_secret_key", "APP_KEY=base64:{s}", lambda r: b64(rbytes(r, 32)))
    add(
        "compose_env",
        "compose_assignment",
        "services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={s}",
        lambda r: tok(r, ALNUM, 16),
    )
    add("tfvars", "terraform_assignment", 'db_master_password = "{s}"', lambda r: tok(r, ALNUM + "!#", 20))
    add("dockerfile_env", "dockerfile_assignment", "ENV API_TOKEN={s}", lambda r: tok(r, HEX, 40))

    # --- Prose passwords and PINs
    c.family = "prose_password"
    add(
        "en_gmail",
        "prose_password_en",
        "my gmail password is {s} if you need to log in",
        lambda r: human_password(r, "en"),
    )
    add(
        "en_wifi",
        "prose_password_en",
        "the wifi password is {s}, all lowercase except the first letter",
        lambda r: human_password(r, "en"),
    )
    add(
        "en_remember",
        "prose_password_en",
        "Remember for later: the password for the NAS is {s}",
        lambda r: human_password(r, "en"),
    )
    add("en_pw_abbrev", "prose_password_en", "login dana / pw {s}", lambda r: human_password(r, "en"))
    add("en_pin", "prose_pin_en", "PIN is {s}", lambda r: pin(r))
    add("en_pin_card", "prose_pin_en", "the PIN for my debit card is {s}, don't tell anyone", lambda r: pin(r))
    add("en_pin_door", "prose_pin_en", "Door code for the office: {s}#", lambda r: pin(r, 6))
    add("en_passphrase", "prose_passphrase_en", 'the passphrase for the backup disk is "{s}"', passphrase)
    # Unquoted passphrases of plain words, told after their name.
    add("en_passphrase_words", "prose_passphrase_words_en", "the passphrase is {s}", passphrase_words("en"))
    add("en_passphrase_ssh", "prose_passphrase_words_en", "passphrase for my ssh key: {s}", passphrase_words("en"))
    add(
        "en_passphrase_disk",
        "prose_passphrase_words_en",
        "Backup disk passphrase is {s} (all lowercase, spaces between)",
        passphrase_words("en"),
    )
    add(
        "en_passphrase_hyphens",
        "prose_passphrase_joined_en",
        "my GPG passphrase is {s} if the agent asks",
        passphrase_words("en", "-"),
    )
    add(
        "en_passphrase_title",
        "prose_passphrase_joined_en",
        "The passphrase for the vault export was {s}.",
        passphrase_words("en", " ", title=True),
    )
    add("de_passphrase", "prose_passphrase_words_de", "die Passphrase für das NAS lautet {s}", passphrase_words("de"))
    add(
        "de_passphrase_title",
        "prose_passphrase_words_de",
        "Passphrase des Schlüssels: {s}",
        passphrase_words("de", " ", title=True),
    )
    add("fr_passphrase", "prose_passphrase_words_fr", "la phrase secrète du coffre est {s}", passphrase_words("fr"))
    add(
        "fr_passphrase_colon",
        "prose_passphrase_words_fr",
        "ma phrase de passe : {s} (sans accents)",
        passphrase_words("fr"),
    )
    add(
        "es_passphrase",
        "prose_passphrase_words_es",
        "la frase de contraseña del disco es {s}",
        passphrase_words("es"),
    )
    add("es_passphrase_colon", "prose_passphrase_words_es", "frase secreta de la copia: {s}", passphrase_words("es"))
    add(
        "de_passwort",
        "prose_password_de",
        "mein Passwort ist {s} falls du dich einloggen musst",
        lambda r: human_password(r, "de"),
    )
    add("de_wlan", "prose_password_de", "das WLAN-Kennwort lautet {s}", lambda r: human_password(r, "de"))
    add(
        "de_kennwort",
        "prose_password_de",
        "Zugang zum Router: Benutzer admin, Kennwort {s}",
        lambda r: human_password(r, "de"),
    )
    add("de_pin", "prose_pin_de", "die PIN meiner EC-Karte ist {s}", lambda r: pin(r))
    add("de_geheimzahl", "prose_pin_de", "Geheimzahl: {s}", lambda r: pin(r))
    add(
        "fr_mdp",
        "prose_password_fr",
        "mon mot de passe est {s} si tu dois te connecter",
        lambda r: human_password(r, "fr"),
    )
    add("fr_wifi", "prose_password_fr", "le mot de passe du wifi c'est {s}", lambda r: human_password(r, "fr"))
    add("fr_mdp_abbrev", "prose_password_fr", "mdp de la box : {s}", lambda r: human_password(r, "fr"))
    add("fr_pin", "prose_pin_fr", "le code PIN de ma carte est {s}", lambda r: pin(r))
    add("fr_code", "prose_pin_fr", "Code de la porte : {s}", lambda r: pin(r))
    add(
        "es_contrasena",
        "prose_password_es",
        "mi contraseña es {s} por si necesitas entrar",
        lambda r: human_password(r, "es"),
    )
    add("es_wifi", "prose_password_es", "la clave del wifi es {s}", lambda r: human_password(r, "es"))
    add("es_correo", "prose_password_es", "Contraseña del correo: {s}", lambda r: human_password(r, "es"))
    add("es_pin", "prose_pin_es", "el PIN es {s}", lambda r: pin(r))
    add("es_pin_tarjeta", "prose_pin_es", "el número secreto de la tarjeta es {s}", lambda r: pin(r))

    # --- Wallet seed phrases (BIP39, checksum included)
    c.family = "wallet_seed"
    add("metamask", "seed_phrase_metamask", "MetaMask secret recovery phrase: {s}", seed_phrase(12))
    add("metamask_chat", "seed_phrase_metamask", "here are my 12 words {s} please help me restore", seed_phrase(12))
    add("trezor", "seed_phrase_trezor", "Trezor backup, 24 words: {s}", seed_phrase(24))
    add("trezor_15", "seed_phrase_trezor", "wallet seed (15 words)\n{s}\nkeep offline", seed_phrase(15))
    add("ledger", "seed_phrase_ledger", "Ledger recovery sheet\n{s}", numbered(seed_phrase(24)))
    add("ledger_12", "seed_phrase_ledger", "recovery words from the card: {s}", numbered(seed_phrase(12)))
    add("bare", "seed_phrase_bare", "{s}", seed_phrase(12))
    add("bare_note", "seed_phrase_bare", "ok pasting it here\n{s}\ndon't share", seed_phrase(21))
    add("de", "seed_phrase_de", "meine Wiederherstellungsphrase lautet {s}", seed_phrase(18))
    add("es", "seed_phrase_es", "frase semilla de la billetera: {s}", seed_phrase(12))
    add("fr", "seed_phrase_fr", "phrase de récupération du portefeuille : {s}", seed_phrase(24))

    # --- Payment cards (Luhn-valid, written with and without separators)
    c.family = "payment_card"
    add("visa_spaced", "payment_card_visa", "Charge the card {s} exp 04/27.", lambda r: spaced_card(card(r, "visa")))
    add("visa_bare", "payment_card_visa", '{"card_number": "{s}", "exp": "11/28"}', lambda r: card(r, "visa"))
    add("visa_chat", "payment_card_visa", "my visa is {s} cvv on the back", lambda r: spaced_card(card(r, "visa"), "-"))
    add(
        "mc_dashed",
        "payment_card_mastercard",
        "Mastercard {s} was declined.",
        lambda r: spaced_card(card(r, "mastercard"), "-"),
    )
    add("mc_bare", "payment_card_mastercard", "card={s}", lambda r: card(r, "mastercard"))
    add("amex", "payment_card_amex", "Amex on file: {s}", lambda r: spaced_card(card(r, "amex")))
    add("amex_bare", "payment_card_amex", "use the company amex {s} for the flights", lambda r: card(r, "amex"))
    add("discover", "payment_card_discover", "Discover card number {s}", lambda r: spaced_card(card(r, "discover")))
    add("jcb", "payment_card_jcb", "JCB: {s}", lambda r: spaced_card(card(r, "jcb"), "-"))
    add("diners", "payment_card_diners", "Diners Club {s} (expires 09/26)", lambda r: spaced_card(card(r, "diners")))
    add("unionpay", "payment_card_unionpay", "银联卡 / UnionPay {s}", lambda r: card(r, "unionpay"))

    # --- Bank accounts (IBAN mod-97 valid)
    c.family = "bank_account"
    add("iban_de", "iban_de", "Wire the refund to {s} (Sparkasse).", lambda r: grouped(iban_for(r, "DE")))
    add("iban_de_kontonr", "iban_de", "Meine IBAN: {s}", lambda r: iban_for(r, "DE"))
    add("iban_gb", "iban_gb", "IBAN: {s}", lambda r: iban_for(r, "GB"))
    add("iban_fr", "iban_fr", "Virement sur {s} merci", lambda r: grouped(iban_for(r, "FR")))
    add("iban_es", "iban_es", "mi IBAN es {s}", lambda r: grouped(iban_for(r, "ES")))
    add("iban_nl", "iban_nl", "Rekeningnummer {s} t.n.v. J. de Vries", lambda r: grouped(iban_for(r, "NL")))
    add("iban_it", "iban_it", "IBAN per il bonifico: {s}", lambda r: grouped(iban_for(r, "IT")))
    add("iban_ch", "iban_ch", "payout_iban: {s}", lambda r: iban_for(r, "CH"))
    add("iban_be", "iban_be", "Compte: {s}", lambda r: grouped(iban_for(r, "BE")))
    add("iban_pl", "iban_pl", "Numer konta: {s}", lambda r: grouped(iban_for(r, "PL")))
    add("iban_at", "iban_at", "Bitte auf {s} überweisen", lambda r: grouped(iban_for(r, "AT")))

    # --- National identifiers (labelled)
    c.family = "national_id"
    add("ssn_labelled", "us_ssn", "Employee record: SSN: {s}, start date 2021-03-01.", ssn)
    add("ssn_words", "us_ssn", "Her social security number is {s}", lambda r: ssn(r).replace("-", " "))
    add("nino", "uk_nino", "National Insurance number: {s}", nino)
    add("nino_compact", "uk_nino", "my NI number is {s}", lambda r: nino(r).replace(" ", ""))
    add("dni", "es_dni", "DNI: {s}", dni)
    add("dni_prose", "es_dni", "mi DNI es {s}", dni)
    add("nie", "es_nie", "NIE del empleado: {s}", nie)
    add("nir", "fr_nir", "numéro de sécurité sociale : {s}", nir)
    add("sin", "ca_sin", "SIN: {s}", sin)
    add("bsn", "nl_bsn", "BSN {s}", bsn)
    add("cpf", "br_cpf", "CPF: {s}", cpf)
    return c.cases


class _LookAlikes:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.cases: list[LookAlike] = []
        self.family = ""

    def add(self, id: str, text: Template) -> None:
        for attempt in range(50):
            rng = random.Random(f"{self.seed}:look:{id}:{attempt}")
            value = text(rng) if callable(text) else text
            if not any(luhn_ok(run) for run in card_like_runs(value)):
                self.cases.append(LookAlike(id, self.family, _split(id), value))
                return
        raise AssertionError(f"{id}: holds a Luhn-valid run of 13 to 19 digits")


def _build_look_alikes(seed: int) -> list[LookAlike]:
    c = _LookAlikes(seed)
    add = c.add

    c.family = "identifier"
    add("uuid", lambda r: f"Memory {uid(r)} was superseded.")
    add("uuid_upper", lambda r: f"Tenant ID: {uid(r).upper()}")
    add("uuid_named_key_id", lambda r: f'"key_id": "{uid(r)}"')
    # Heroku names its apps, dynos, releases and builds by UUIDs too; only its API keys are secrets.
    add("heroku_app_id", lambda r: f"heroku apps:info shows ID {uid(r)}")
    add("heroku_release", lambda r: f"Heroku release {uid(r)} failed to boot")
    add("heroku_dyno", lambda r: f"heroku ps: web dyno {uid(r)} restarted")
    add("heroku_build", lambda r: f"Heroku build {uid(r)} finished in 94 s")
    add("heroku_api_app", lambda r: f"the heroku api call for app {uid(r)} returned 404")
    add("idempotency_key", lambda r: f"Idempotency-Key: {uid(r)}")
    add("request_id", lambda r: f"x-amz-request-id: {tok(r, UPPER_ALNUM, 16)}")
    add("git_sha", lambda r: f"Fixed in commit {tok(r, HEX, 40)} on main.")
    add("git_short_sha", lambda r: f"Revert {tok(r, HEX, 7)} and redeploy.")
    add("git_sha_assignment", lambda r: f'commit_sha = "{tok(r, HEX, 40)}"')
    add("mongo_object_id", lambda r: f'db.users.find({{_id: ObjectId("{tok(r, HEX, 24)}")}})')
    add("ulid", lambda r: f"event {tok(r, '0123456789ABCDEFGHJKMNPQRSTVWXYZ', 26)} queued")
    add("ksuid", lambda r: f'"id": "{tok(r, ALNUM, 27)}"')
    add("nanoid", lambda r: f"short id {tok(r, URLSAFE, 21)} assigned to the upload")
    add("ec2_ids", lambda r: f"instance i-0{tok(r, HEX, 16)} in vpc-0{tok(r, HEX, 16)} uses ami-0{tok(r, HEX, 16)}")
    add("aws_arn", lambda r: f"arn:aws:iam::{digits(r, 12)}:role/deploy-{tok(r, LOWER, 6)}")
    add("aws_account", lambda r: f"AWS account {digits(r, 12)} (prod)")
    add("cloudfront", lambda r: f"Invalidate distribution E{tok(r, UPPER_ALNUM, 13)}")
    add("azure_subscription", lambda r: f"az account set --subscription {uid(r)}")
    add("gcp_project_number", lambda r: f"projects/{digits(r, 12)}/locations/europe-west1")
    add("stripe_object_ids", lambda r: f"customer cus_{tok(r, ALNUM, 14)} paid invoice in_1{tok(r, ALNUM, 23)}")
    add("stripe_price", lambda r: f"STRIPE_PRICE_ID=price_1{tok(r, ALNUM, 23)}")
    add(
        "slack_channel", lambda r: f"Channel C0{tok(r, UPPER_ALNUM, 8)}, user U0{tok(r, UPPER_ALNUM, 8)}, hugs and xoxo"
    )
    add("discord_snowflake", lambda r: f"user id {not_luhn(digits(r, 18))} joined")
    add("k8s_pod", lambda r: f"pod web-{tok(r, LOWER_ALNUM, 10)}-{tok(r, LOWER_ALNUM, 5)} CrashLoopBackOff")
    add("docker_container", lambda r: f"container {tok(r, HEX, 12)} exited (137)")
    add("sentry_event", lambda r: f"Sentry event {tok(r, HEX, 32)}")
    add("trace_ids", lambda r: f"trace_id={tok(r, HEX, 32)} span_id={tok(r, HEX, 16)}")
    add("youtube", lambda r: f"watch https://youtu.be/{tok(r, URLSAFE, 11)} from 2:30")
    add("short_link", lambda r: f"short link: https://bit.ly/{tok(r, ALNUM, 7)}")
    add("gdrive", lambda r: f"doc: https://docs.google.com/document/d/{tok(r, URLSAFE, 44)}/edit")
    add("notion_page", lambda r: f"https://www.notion.so/acme/Runbook-{tok(r, HEX, 32)}")
    add("figma_file", lambda r: f"https://www.figma.com/file/{tok(r, ALNUM, 22)}/Design-System")
    add(
        "google_client_id",
        lambda r: f"GOOGLE_CLIENT_ID={digits(r, 12)}-{tok(r, LOWER_ALNUM, 32)}.apps.googleusercontent.com",
    )

    c.family = "digest"
    add("sha256", lambda r: f"sha256sum: {tok(r, HEX, 64)}  release.tar.gz")
    add("sha512", lambda r: f"SHA512 ({tok(r, LOWER, 6)}.iso) = {tok(r, HEX, 128)}")
    add("sha1_checksum", lambda r: f"checksum_sha1: {tok(r, HEX, 40)}")
    add("md5_etag", lambda r: f'ETag: "{tok(r, HEX, 32)}"')
    add("docker_digest", lambda r: f"python:3.12-slim@sha256:{tok(r, HEX, 64)}")
    add("npm_integrity", lambda r: f'"integrity": "sha512-{b64(rbytes(r, 64))}"')
    add("go_sum", lambda r: f"golang.org/x/net v0.24.0 h1:{b64(rbytes(r, 32))}")
    add("pip_hash", lambda r: f"requests==2.32.3 --hash=sha256:{tok(r, HEX, 64)}")
    add("sri", lambda r: f'<script src="/app.js" integrity="sha384-{b64(rbytes(r, 48))}"></script>')
    add("content_hash", lambda r: f'content_hash = "{tok(r, HEX, 64)}"')
    add(
        "lfs_pointer",
        lambda r: (
            "version https://git-lfs.github.com/spec/v1\n"
            f"oid sha256:{tok(r, HEX, 64)}\nsize {r.randrange(10**3, 10**8)}"
        ),
    )
    add("ipfs_cid", lambda r: "ipfs://bafy" + tok(r, "abcdefghijklmnopqrstuvwxyz234567", 55))
    add("magnet", lambda r: f"magnet:?xt=urn:btih:{tok(r, HEX, 40)}&dn=ubuntu.iso")
    add("eth_tx", lambda r: f"tx 0x{tok(r, HEX, 64)} confirmed")
    add("blake3", lambda r: f"blake3:{tok(r, HEX, 64)}")

    c.family = "public_key"
    add("ssh_ed25519", lambda r: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b64(rbytes(r, 32))[:43]} dana@laptop")
    add("ssh_rsa", lambda r: f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{b64(rbytes(r, 380))} deploy@ci")
    add(
        "ssh_ecdsa",
        lambda r: "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBB" + b64(rbytes(r, 66)),
    )
    add(
        "authorized_keys",
        lambda r: (
            f'command="/usr/bin/backup",no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b64(rbytes(r, 32))[:43]} backup'
        ),
    )
    add("known_hosts", lambda r: f"github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b64(rbytes(r, 32))[:43]}")
    add(
        "public_key_assignment",
        lambda r: f'public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b64(rbytes(r, 32))[:43]}"',
    )
    add("pem_public", lambda r: pem(r, "PUBLIC KEY", "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA", 294))
    add("pem_rsa_public", lambda r: "verify with\n" + pem(r, "RSA PUBLIC KEY", "MIIBCgKCAQEA", 270))
    add("pem_certificate", lambda r: "ca.crt:\n" + pem(r, "CERTIFICATE", "MIIDdzCCAl+gAwIBAgIE", 890))
    add("pem_csr", lambda r: pem(r, "CERTIFICATE REQUEST", "MIICvDCCAaQCAQAwdzEL", 700))
    add(
        "pgp_public",
        lambda r: "my public key:\n" + pem(r, "PGP PUBLIC KEY BLOCK", "mQINBG", 1100, headers="Comment: dana\n"),
    )
    add("age_recipient", lambda r: "encrypt to " + bech32("age", _to5(rbytes(r, 32))))
    add("wireguard_public", lambda r: f"[Peer]\nPublicKey = {b64(rbytes(r, 32))}\nAllowedIPs = 10.8.0.0/24")
    add(
        "jwks",
        lambda r: json.dumps(
            {
                "keys": [
                    {
                        "kty": "RSA",
                        "kid": tok(r, HEX, 16),
                        "use": "sig",
                        "alg": "RS256",
                        "n": b64url(rbytes(r, 256)),
                        "e": "AQAB",
                    }
                ]
            }
        ),
    )
    add("ssh_fingerprint", lambda r: f"ED25519 key fingerprint is SHA256:{b64(rbytes(r, 32)).rstrip('=')}.")
    add("gpg_fingerprint", lambda r: "Key fingerprint = " + " ".join(tok(r, HEX, 4).upper() for _ in range(10)))
    add("minisign", lambda r: f"minisign -Vm file.tar.gz -P RWQ{b64(rbytes(r, 40))[:53]}")
    add("btc_address", lambda r: "send to " + bech32("bc", [0, *_to5(rbytes(r, 20))]))
    add("eth_address", lambda r: f"Send gas to 0x{tok(r, HEX, 40)} on testnet.")

    c.family = "public_token"
    add("stripe_pk_live", lambda r: "The publishable key " + "pk" + f"_live_51{tok(r, ALNUM, 97)} is public by design.")
    add("stripe_pk_test", lambda r: "STRIPE_PUBLISHABLE_KEY=" + "pk" + f"_test_51{tok(r, ALNUM, 97)}")
    add(
        "clerk_pk",
        lambda r: "NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=" + "pk" + "_live_" + b64(b"clerk.acme.test$").rstrip("="),
    )
    add(
        "mapbox_pk",
        lambda r: (
            "mapboxgl.accessToken = '"
            + "pk."
            + b64url(json.dumps({"u": "acme", "a": tok(r, LOWER_ALNUM, 25)}, separators=(",", ":")).encode())
            + "."
            + tok(r, URLSAFE, 22)
            + "';"
        ),
    )
    add("algolia_search", lambda r: f"ALGOLIA_SEARCH_ONLY_KEY={tok(r, HEX, 32)}  # safe in the browser")
    add("recaptcha_site", lambda r: f'<div class="g-recaptcha" data-sitekey="6L{tok(r, URLSAFE, 38)}"></div>')
    add("sentry_dsn", lambda r: f"SENTRY_DSN=https://{tok(r, HEX, 32)}@o{digits(r, 6)}.ingest.sentry.io/{digits(r, 7)}")
    add(
        "posthog_public",
        lambda r: "posthog.init('" + "ph" + f"c_{tok(r, ALNUM, 43)}', {{api_host: 'https://eu.posthog.com'}})",
    )

    c.family = "encoded_data"
    add("data_uri_png", lambda r: f"Logo: data:image/png;base64,{b64(rbytes(r, 180))}")
    add("data_uri_font", lambda r: f"src: url(data:font/woff2;base64,{b64(rbytes(r, 120))}) format('woff2');")
    add("base64_hello", lambda r: "The header X-Debug: SGVsbG8gd29ybGQ= is harmless.")
    add(
        "pagination_cursor",
        lambda r: "GET /memories?cursor=" + b64url(json.dumps({"offset": r.randrange(50, 500)}).encode()),
    )
    add("jwt_header_only", lambda r: "a JWT header alone, eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ, says nothing secret")
    add("protobuf_b64", lambda r: f'"payload": "{b64(rbytes(r, 24))}"')
    add("saml_request", lambda r: f"SAMLRequest={b64url(rbytes(r, 90))}&RelayState=%2Fdashboard")
    add("css_colours", lambda r: f"color: #{tok(r, HEX, 6)}; background: #{tok(r, HEX, 6)}; border-radius: 4px;")

    c.family = "env_reference"
    add("compose_ref", "Set password=${DB_PASSWORD} in the compose file.")
    add("py_environ", 'password = os.environ["DB_PASSWORD"]')
    add("py_getenv", 'api_key = os.getenv("OPENAI_API_KEY")')
    add("js_env", "const apiKey = process.env.API_KEY;")
    add("js_env_token", "headers: { Authorization: `Bearer ${process.env.TOKEN}` }")
    add("gha_secret", "password: ${{ secrets.DB_PASSWORD }}")
    add("erb_env", "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>")
    add("django_env", 'SECRET_KEY = env("DJANGO_SECRET_KEY")')
    add("go_env", 'token := os.Getenv("GITHUB_TOKEN")')
    add("java_env", 'String pass = System.getenv("DB_PASS");')
    add("rust_env", 'let key = std::env::var("STRIPE_SECRET_KEY")?;')
    add("symfony_env", "password: '%env(DATABASE_PASSWORD)%'")
    add("helm_template", "password: {{ .Values.postgres.password | quote }}")
    add("terraform_var", "password = var.db_master_password")
    add("npmrc_ref", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}")
    add("shell_cat_secret", 'export API_TOKEN="$(cat /run/secrets/api_token)"')
    add("env_names_only", "Required: STRIPE_SECRET_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWORD (see .env.example)")
    add("vscode_env", '"apiKey": "${env:OPENAI_API_KEY}"')

    c.family = "secret_reference"
    add("vault_path", "read it from secret/data/prod/db with vault kv get")
    add("vault_prose", "the key is in Vault under kv/payments/stripe")
    add("vault_agent", 'password: {{ with secret "database/creds/readonly" }}{{ .Data.password }}{{ end }}')
    add("op_reference", "STRIPE_KEY=op://Production/Stripe/credential")
    add("aws_sm_arn", lambda r: f"arn:aws:secretsmanager:eu-west-1:{digits(r, 12)}:secret:prod/db-{tok(r, ALNUM, 6)}")
    add("gcp_sm", lambda r: f"projects/{digits(r, 12)}/secrets/db-password/versions/latest")
    add("azure_kv", lambda r: f"https://acme-kv.vault.azure.net/secrets/db-password/{tok(r, HEX, 32)}")
    add("k8s_secret_key_ref", "valueFrom:\n  secretKeyRef:\n    name: db\n    key: password")
    add("k8s_env_from", "envFrom:\n  - secretRef:\n      name: stripe-credentials")
    add("password_file", "POSTGRES_PASSWORD_FILE=/run/secrets/postgres_password")
    add("sops_ref", "password: ENC[AES256_GCM,data:...,type:str] (decrypt with sops -d)")
    add("cfn_ref", "MasterUserPassword: !Sub '{{resolve:secretsmanager:prod/db:SecretString:password}}'")
    add("ansible_vault", "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256")
    add("prose_1password", "the password is stored in 1Password under 'Gmail'")

    c.family = "placeholder"
    add("angle", "token: <redacted>, api_key: <your-api-key>")
    add("elided_sk", "export OPENAI_API_KEY=sk-...")
    add("mask_stars", 'password: "********"')
    add("xs", "API_KEY=xxxxxxxxxxxxxxxxxxxxxxxx")
    add("your_key_here", "API_KEY=your_api_key_here")
    add("replace_me", "SLACK_BOT_TOKEN=REPLACE_ME")
    add("redacted", "Authorization: Bearer [REDACTED]")
    add("masked_stripe", "Using key " + "sk" + "_live_••••••••••••4242 (masked in the dashboard)")
    add("masked_github", "token " + "gh" + "p_************************************ was revoked")
    add("masked_aws", "AWS_ACCESS_KEY_ID=" + "AK" + "IA****************")
    add("docs_dsn", "Point it at postgres://user:password@localhost:5432/app while developing.")
    add("dsn_template", "mysql://root:<password>@localhost:3306/db")
    add("dsn_env", "redis://:${REDIS_PASSWORD}@cache:6379/0")
    add("xoxb_your", "SLACK_TOKEN=xoxb-your-token-here")
    add("empty_password", 'DB_PASSWORD=""')
    add("none_password", "password = None")
    add("null_json", '{"password": null, "token": ""}')
    add("todo", "secret_key: TODO  # set in prod")

    c.family = "prose_about_secret"
    add("en_policy", "The password policy requires 12 characters, one digit and one symbol.")
    add("en_forgot", "I forgot my password again, can you reset it?")
    add("en_incorrect", "my password is incorrect according to the login page")
    add("en_expired", "the wifi password is expired, IT will send a new one")
    add("en_router", "the wifi password is on the back of the router")
    add("en_pin_required", "PIN is required at checkout for cards over 50 euros.")
    add("en_pin_digits", "enter your four-digit PIN and press OK")
    add("en_rotate", "Rotate the API key every 90 days and never paste secrets into chat.")
    add("en_token_expiry", "The access token expires after 3600 seconds; refresh tokens last 30 days.")
    add("en_same", "my password is the same as last time, ask me in person")
    add("en_ssn_optional", "The SSN field is optional for contractors.")
    add("en_cvv", "CVV is the three digits on the back; never store it.")
    add("de_abgelaufen", "mein Passwort ist abgelaufen, ich muss es ändern")
    add("de_falsch", "mein Passwort ist falsch, sagt die Anmeldeseite")
    add("de_vergessen", "Passwort vergessen? Klicke auf „Zurücksetzen“.")
    add("de_richtlinie", "Das Kennwort muss mindestens 12 Zeichen lang sein.")
    add("de_pin", "Nach dreimaliger falscher PIN-Eingabe wird die Karte gesperrt.")
    add("de_wlan", "das WLAN-Kennwort steht auf der Rückseite des Routers")
    add("fr_court", "mon mot de passe est trop court d'après le site")
    add("fr_expire", "mon mot de passe a expiré hier")
    add("fr_gestionnaire", "le mot de passe est dans le gestionnaire de l'équipe")
    add("fr_pin", "le code PIN est demandé à chaque paiement")
    add("fr_incorrect", "mon mot de passe est incorrect, je réessaie demain")
    add("es_gestor", "mi contraseña está en el gestor de contraseñas")
    add("es_corta", "la contraseña es demasiado corta, pide doce caracteres")
    add("es_olvide", "olvidé mi contraseña otra vez")
    add("es_pin", "el PIN es obligatorio para pagar con la tarjeta")
    add("es_incorrecta", "mi contraseña es incorrecta según la web del banco")
    add("form_labels", "Username: bob Password: Email: bob@acme.test Phone: +1 415 555 0132")
    add("password_label_eol", "Password:\nask the on-call engineer.")
    add("markdown_label", "**Password:** use SSO, never a shared login.")
    add("en_passphrase_vault", "the passphrase is stored in 1Password under Backup Disk")
    add("en_passphrase_whatever", "the passphrase is whatever you typed when you created the key")
    add("en_passphrase_advice", "choose a passphrase of five random words instead of a short password")
    add("en_passphrase_rotated", "the passphrase is rotated every ninety days by the security team")
    add("en_passphrase_offline", "the passphrase is kept offline somewhere safe")
    add("de_passphrase_manager", "die Passphrase steht im Passwortmanager unter Backup")
    add("fr_passphrase_coffre", "la phrase secrète est dans le coffre de l'équipe")
    add("es_passphrase_sobre", "la frase de contraseña está en el sobre cerrado")
    add("en_seed_advice", "never type your seed phrase into a website, write the twelve words on paper instead")

    c.family = "number"

    def card_like(brand: str, sep: str) -> Callable[[R], str]:
        prefixes = {"visa": "4", "mc": "5", "amex": "37", "discover": "6011"}
        length = 15 if brand == "amex" else 16
        return lambda r: (
            f"Test with {spaced_card(luhn_broken(r, prefixes[brand], length), sep)}, which fails the checksum."
        )

    add("card_like_visa", card_like("visa", " "))
    add("card_like_mc", card_like("mc", "-"))
    add("card_like_amex", card_like("amex", " "))
    add("card_like_discover_bare", card_like("discover", ""))
    add("card_like_order", lambda r: f"Order number {spaced_card(luhn_broken(r, '4', 16), '-')} confirmed")
    add("card_like_tracking", lambda r: f"Tracking {spaced_card(luhn_broken(r, '9', 16))} arrives Monday")
    add("card_last4", lambda r: f"Paid with the card ending in {digits(r, 4)}.")
    add("card_expiry", lambda r: f"Card expires {r.randrange(1, 13):02d}/{r.randrange(25, 32)}.")

    def bad_iban(country: str) -> Callable[[R], str]:
        def make(r: R) -> str:
            good = iban_for(r, country)
            # Valid check digits run 02..98 and are unique per account: any other value in that range is wrong.
            check = 2 + (int(good[2:4]) - 2 + r.randrange(1, 97)) % 97
            return f"Account {grouped(good[:2] + f'{check:02d}' + good[4:])} bounced: invalid check digits."

        return make

    add("iban_bad_de", bad_iban("DE"))
    add("iban_bad_fr", bad_iban("FR"))
    add("iban_bad_gb", bad_iban("GB"))
    add("order_number", lambda r: f"Order #A-{r.randrange(2019, 2026)}-{digits(r, 6)} shipped.")
    add("invoice", lambda r: f"Invoice INV-{r.randrange(2019, 2026)}-{digits(r, 5)} is overdue.")
    add("ups_tracking", lambda r: f"UPS 1Z{tok(r, UPPER_ALNUM, 16)}")
    add("fedex_tracking", lambda r: f"FedEx tracking {digits(r, 12)}")
    add("usps_tracking", lambda r: f"USPS {digits(r, 22, '9')}")
    add("phone_us", lambda r: f"Call support at +1 (415) 555-{digits(r, 4)} ext. {digits(r, 3)}.")
    add("phone_de", lambda r: f"Ruf mich an: +49 151 {digits(r, 8)}")
    add("phone_fr", lambda r: f"mon numéro : 06 {digits(r, 2)} {digits(r, 2)} {digits(r, 2)} {digits(r, 2)}")
    add("phone_es", lambda r: f"mi móvil es +34 6{digits(r, 2)} {digits(r, 3)} {digits(r, 3)}")
    add("isbn", "See ISBN 978-0-13-468599-1 and ISBN-10 0-306-40615-2.")
    add("ean", lambda r: f"barcode {not_luhn(digits(r, 13, '4'))}")
    add(
        "semver",
        lambda r: (
            f"Upgraded to {r.randrange(1, 9)}.{r.randrange(0, 30)}.{r.randrange(0, 30)}; client v2.14.3-rc.1+build.5."
        ),
    )
    add(
        "timestamps",
        lambda r: (
            f"created_at={r.randrange(1_600_000_000, 1_800_000_000)} "
            f"updated_at_ms={not_luhn(str(r.randrange(1_600_000_000_000, 1_800_000_000_000)))}"
        ),
    )
    add("iso_timestamp", "Started 2024-05-17T10:42:13.123Z, finished 2024-05-17 10:45:01,887.")
    add(
        "sku_ssn_shape",
        lambda r: f"SKU {r.randrange(100, 899)}-{r.randrange(10, 99)}-{r.randrange(1000, 9999)} is out of stock",
    )
    add(
        "amounts",
        lambda r: f"| 2024 | {r.randrange(1, 999)},{r.randrange(100, 999)},{r.randrange(100, 999)} | 89.5% | 0.0042 |",
    )
    add("postcode", "Ship to 10115 Berlin, 75008 Paris, SW1A 1AA London.")
    add("pin_length", "PINs have 4 to 6 digits; 0000 and 1234 are refused.")

    c.family = "network"
    add("ipv4", lambda r: f"Listen on 10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}:8080")
    add("ipv6", lambda r: f"peer [2001:db8::{tok(r, HEX, 4)}]:443 connected")
    add("mac", lambda r: "NIC " + ":".join(tok(r, HEX, 2).upper() for _ in range(6)) + " went down")
    add("url_user_only", "Clone https://deploy@git.acme.test/app.git or ssh://git@github.com:22/acme/api.git.")
    add("email", "Mail alice@acme.test or ops+alerts@acme.test.")
    add("url_with_port", "Open http://localhost:8000/admin/login/?next=/admin/")
    add("token_endpoint", '"token_endpoint": "https://oauth2.googleapis.com/token"')
    add("cidr", lambda r: f"allow 10.{r.randrange(256)}.0.0/16 and 192.168.{r.randrange(256)}.0/24 on port 5432")
    add("hostname", lambda r: f"ip-10-0-{r.randrange(256)}-{r.randrange(256)}.eu-west-1.compute.internal is draining")
    add("utm_url", lambda r: f"https://acme.test/pricing?utm_source=newsletter&utm_campaign={tok(r, LOWER_ALNUM, 12)}")
    add("dkim_txt", lambda r: f'selector1._domainkey TXT "v=DKIM1; k=rsa; p={b64(rbytes(r, 162))}"')
    add("spf_txt", 'acme.test TXT "v=spf1 include:_spf.google.com include:sendgrid.net ~all"')
    add("x_forwarded", lambda r: f"X-Forwarded-For: 203.0.113.{r.randrange(1, 255)}, 10.0.0.{r.randrange(1, 255)}")
    add("s3_url", lambda r: f"s3://acme-backups/{r.randrange(2020, 2026)}/{tok(r, HEX, 16)}.tar.zst")

    c.family = "code_name"
    add("annotation", "def login(username: str, password: str) -> Token:")
    add("optional", "api_key: Optional[str] = None")
    add("settings_ref", "api_key = settings.OPENAI_API_KEY")
    add("make_password", "password = make_password(raw)")
    add("set_password", "user.set_password(password=new_password)")
    add("check_password", "if not check_password(password, user.password_hash):")
    add("getpass", 'password = getpass.getpass("Password: ")')
    add("ts_type", "interface Config { apiKey: string; secret?: string }")
    add("max_tokens", lambda r: f"max_tokens: {r.randrange(256, 8192)}, token_count={r.randrange(10, 99999)}")
    add("cache_key", lambda r: f'cache_key = "user:{r.randrange(1, 99999)}:profile"')
    add("primary_key", "id = models.BigAutoField(primary_key=True)")
    add("partition_key", "PartitionKey: tenant_id, SortKey: created_at")
    add("key_algorithm", "JWT_ALGORITHM=RS256\nKEY_SIZE=4096")
    add("password_min", "PASSWORD_MIN_LENGTH=12\nPASSWORD_RESET_TIMEOUT=3600")
    add("token_type", '{"token_type": "Bearer", "expires_in": 3600, "scope": "read"}')
    add("secret_santa", "secret_santa_budget: 25")
    add("passwordless", '"passwordless": true, "mfa_required": false')
    add("api_key_header_name", 'API_KEY_HEADER = "X-API-Key"')
    add("yaml_bool_secret", "secret: false")
    add("keyboard", "Press the Windows key + R, type cmd.")
    add("kubectl", "kubectl -n payments create secret generic stripe --from-env-file=.env.prod")
    add("sklearn", "Wrap it with sk-learn-compatible-estimator-wrapper-v2 first.")
    add("prefix_prose", "Classic tokens start with " + "gh" + "p_ and fine-grained ones with github" + "_pat_.")
    add("akia_prose", "AKIA prefixes mark long-term keys, ASIA temporary ones.")
    add("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word.")

    # Ordinary English: most of its content words are BIP39 words too, its function words are not.
    c.family = "plain_prose"
    for i in range(6):
        add(f"chat_{i}", lambda r: " ".join(r.sample(_PLAIN_SENTENCES, 3)))
    for i in range(4):
        add(f"sentences_{i}", lambda r: " ".join(s.capitalize() + "." for s in r.sample(_PLAIN_SENTENCES, 4)))
    add("listed_words_commas", lambda r: "shopping list: " + ", ".join(r.sample(_bip39().wordlist, 14)))
    add(
        "listed_words_bullets",
        lambda r: "packing list\n" + "\n".join(f"- {w}" for w in r.sample(_bip39().wordlist, 12)),
    )
    add("listed_words_short_lines", lambda r: ". ".join(" ".join(r.sample(_bip39().wordlist, 4)) for _ in range(4)))
    return c.cases


# Sentences of everyday English (chat, notes), lower case and without punctuation as people type them.
_PLAIN_SENTENCES = (
    "we can talk about the budget after lunch on friday if you have time",
    "the kitchen light in the old office is still broken so bring a lamp",
    "my brother wants to rent a small boat for the lake trip next summer",
    "please remember to water the garden and feed the cat while we are away",
    "the train was late again because of a signal problem near the river bridge",
    "she will bring fresh bread cheese and fruit to the picnic on the hill",
    "our team shipped the mobile app update and the crash report looks clean",
    "the doctor said to drink more water and take a short walk every morning",
    "i left the spare key with the neighbor in case the plumber arrives early",
    "the museum has a new exhibit about ancient glass and it opens in april",
    "can you check whether the coffee machine on the third floor is fixed yet",
    "they moved the weekly meeting to the large room because the project grew",
    "the kids want pizza for dinner and a movie about a dragon and a knight",
    "after the storm the road to the farm was closed for almost a whole day",
    "the client asked for a simple report with one chart per month and a summary",
    "remember that the office will close early on the last day of the month",
    "good morning team just a quick note that the shared drive will be slow today",
    "my aunt found an old photo of the family house near the lake last winter",
    "the bank called about a late payment but it was a simple mistake on their side",
    "we need more paper for the printer and a new cable for the projector",
)


@dataclass(frozen=True)
class Corpus:
    seed: int
    secrets: tuple[SecretCase, ...]
    look_alikes: tuple[LookAlike, ...]


def generate(seed: int) -> Corpus:
    """The whole corpus for one seed; the same seed gives the same corpus."""
    return Corpus(seed, tuple(_build_secrets(seed)), tuple(_build_look_alikes(seed)))


@functools.cache
def _corpus() -> Corpus:
    return generate(SEED)


def secret_cases() -> list[SecretCase]:
    return list(_corpus().secrets)


def look_alikes() -> list[LookAlike]:
    return list(_corpus().look_alikes)
