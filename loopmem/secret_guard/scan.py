"""Finds credentials and personal secrets in text before it is stored, and redacts them.

Six sources of findings, all run in-process on the text itself (docs/security.md, "Sources"):

- a maintained rule set of provider token formats (loopmem.secret_guard.rules: Kingfisher's rules, ~430 formats);
- detect-secrets' high-precision plugins (fixed token formats and labelled assignments). Its entropy plugins,
  its generic KeywordDetector, and its JWT, OpenAI and npm plugins (quadratic backtracking on crafted input)
  are left out;
- structure (loopmem.secret_guard.structure): a value under a secret's name, and passwords, PINs and keys told in a
  sentence, in six languages;
- national identity numbers confirmed by their check digits (loopmem.secret_guard.ids);
- wallet seed phrases: runs of BIP39 words of a seed's length (loopmem.secret_guard.seed_phrase);
- our own patterns, for what none of those covers: payment cards (Luhn + issuer ranges), IBANs (mod-97),
  whole PEM and PuTTY private-key blocks, JWTs whose header names an algorithm, passwords in URLs, loopmem's own
  API keys, labelled US SSNs, GCP service-account keys, Azure connection-string keys, Heroku keys beside their
  name, and provider formats the rule set lacks, each with its documentation named.

A finding holds a kind and character offsets, never the secret itself, so it can be logged or returned.
Documented example keys (AWS's `AKIAIOSFODNN7EXAMPLE`, ...) are findings too: they have the real shape,
and telling them apart from a live key would need a list that real keys could hide behind.

Speed: every regex starts with a literal where it can (Python's engine then skips ahead with a fast
search instead of trying each position); keyword-led patterns and the detect-secrets plugins only see
the lines that pass a cheap, sound prefilter. `scripts/bench_secret_scan.py` measures it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from loopmem.secret_guard import ids, rules, seed_phrase, structure
from loopmem.secret_guard.structure import Form, Locate


@dataclass(frozen=True)
class Finding:
    """One secret in a text: its kind and its span `text[start:end]` (never the value)."""

    kind: str
    start: int
    end: int


# ---------------------------------------------------------------------------------------------------------
# Our own patterns: structure.Form, a regex and where in a match the secret lies.

_Check = Callable[[re.Match[str]], bool]


def _where(group: int | str = 0, check: _Check | None = None) -> Locate:
    def locate(match: re.Match[str]) -> tuple[int, int] | None:
        if check is not None and not check(match):
            return None
        return match.span(group)

    return locate


_T = "A-Za-z0-9_-"  # the characters of a token


def _token(prefix: str, body: str) -> re.Pattern[str]:
    """A token: `prefix` (fixed width) then `body`, with no token character on either side.

    The left boundary is asserted after the prefix, not before it, so the regex still opens with a literal.
    """
    return re.compile(rf"{prefix}(?<![{_T}]{prefix}){body}(?![{_T}])")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# (lowest prefix, highest prefix, allowed lengths): the issuer ranges of the card networks in wide use.
# Luhn alone passes one random number in ten; requiring a real issuer range and its length keeps order
# numbers, timestamps and phone numbers out.
_CARD_RANGES: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),  # Visa
    ("51", "55", frozenset({16})),  # Mastercard
    ("2221", "2720", frozenset({16})),  # Mastercard 2-series
    ("34", "34", frozenset({15})),  # American Express
    ("37", "37", frozenset({15})),
    ("6011", "6011", frozenset(range(16, 20))),  # Discover
    ("644", "649", frozenset(range(16, 20))),
    ("65", "65", frozenset(range(16, 20))),
    ("300", "305", frozenset(range(14, 20))),  # Diners Club
    ("36", "36", frozenset(range(14, 20))),
    ("38", "39", frozenset(range(16, 20))),
    ("3528", "3589", frozenset(range(16, 20))),  # JCB
    ("62", "62", frozenset(range(16, 20))),  # UnionPay
    ("5018", "5018", frozenset(range(13, 20))),  # Maestro
    ("5020", "5020", frozenset(range(13, 20))),
    ("5038", "5038", frozenset(range(13, 20))),
    ("5893", "5893", frozenset(range(13, 20))),
    ("6304", "6304", frozenset(range(13, 20))),
    ("6759", "6759", frozenset(range(13, 20))),
    ("6761", "6763", frozenset(range(13, 20))),
)


def _is_card_number(match: re.Match[str]) -> bool:
    digits = re.sub(r"[ -]", "", match.group(0))
    if not 13 <= len(digits) <= 19:
        return False
    issued = any(low <= digits[: len(low)] <= high and len(digits) in lengths for low, high, lengths in _CARD_RANGES)
    return issued and _luhn_ok(digits)


# IBAN length by country (the SWIFT IBAN registry).
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
    "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def _iban_span(match: re.Match[str]) -> tuple[int, int] | None:
    text = match.group(0)
    length = _IBAN_LENGTHS.get(text[:2])
    if length is None:
        return None
    # The regex may run on into a following word of four capitals or digits: cut at the country's length,
    # which must fall where a group ends.
    ends = [i + 1 for i, ch in enumerate(text) if ch != " "]
    if len(ends) < length:
        return None
    end = ends[length - 1]
    if end < len(text) and text[end] != " ":
        return None
    compact = text[:end].replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    if int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 != 1:
        return None
    return match.start(), match.start() + end


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _is_jwt(match: re.Match[str]) -> bool:
    # The header is what makes it a JWT; the payload is usually JSON claims but need not be.
    header, payload, _signature = match.group(0).split(".", 2)
    try:
        decoded = json.loads(_b64url(header))
        _b64url(payload)
    except ValueError:  # binascii.Error, JSONDecodeError and UnicodeDecodeError are all ValueErrors
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _is_ssn(match: re.Match[str]) -> bool:
    digits = re.sub(r"[ -]", "", match.group("ssn"))
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    # The SSA never issues area 000, 666 or 900-999, group 00 or serial 0000.
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _is_mixed_alnum(value: str) -> bool:
    # A random key of 20+ characters has upper, lower and digits; kebab-case words, part numbers and prose
    # do not.
    return any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _mixed_alnum(match: re.Match[str]) -> bool:
    return _is_mixed_alnum(match.group(0))


def _has_letter_and_digit(match: re.Match[str]) -> bool:
    value = match.group("value")
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_CREDENTIAL_WORD = re.compile(r"(?i)key|token|auth|secret|credential|passw")
# What a UUID next to "heroku" is when it is not a key: the id of something the platform runs.
_HEROKU_ID_WORD = re.compile(
    r"(?i)(?:\b|_)(?:id|ids|app|apps|dyno|dynos|release|releases|build|builds|slug|addon|add-on|pipeline|space|team"
    r"|request|user|account|oauth-client|client)\W*$"
)


_UUID_TOKEN = re.compile(
    r"(?<![0-9A-Za-z-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z-])"
)


def _heroku_key(match: re.Match[str]) -> tuple[int, int] | None:
    # The UUID is searched for in the rest of the line (at most 60 characters away) rather than by a lazy gap in
    # the regex, which tried the UUID at every position after every "heroku".
    text, after = match.string, match.end()
    line_end = text.find("\n", after, after + 100)
    uuid = _UUID_TOKEN.search(text, after, min(len(text), after + 100) if line_end == -1 else line_end)
    if uuid is None or uuid.start() - after > 60:
        return None
    gap = text[after : uuid.start()]
    return uuid.span() if _CREDENTIAL_WORD.search(gap) and not _HEROKU_ID_WORD.search(gap) else None


_PLACEHOLDER = structure.PLACEHOLDER
_IDENTIFIER = structure.IDENTIFIER
_char_classes = structure.char_classes


def _is_secret_value(match: re.Match[str]) -> bool:
    value = match.group("value")
    quoted = match.group("quote") is not None
    if len(value) < 6 or _PLACEHOLDER.match(value):
        return False
    if not quoted:
        # `password=get_password()` / `password=items[0]`: an expression, not a literal.
        following = match.string[match.end("value") : match.end("value") + 1]
        if following in ("(", "[") or _IDENTIFIER.match(value):
            return False
    return _char_classes(value) >= 2 or (quoted and len(value) >= 12)


def _is_url_password(value: str) -> bool:
    # `postgres://user:password@localhost` is how documentation writes a connection string.
    return not structure.stands_for_a_secret(value)


def _url_userinfo_password(match: re.Match[str]) -> bool:
    value = match.group("value")
    if re.match(r"\d{1,5}[?#]", value):
        return False  # `host:8080?next=a@b.test`: a port, then a query holding an address
    return _is_url_password(value)


def _assignment(keys: str) -> re.Pattern[str]:
    """`<key> <op> <value>`: the key optionally prefixed (`DB_PASSWORD`, `redis.password`) and quoted."""
    return re.compile(
        rf"(?i)(?<![A-Za-z0-9])(?:{keys})[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*"
        # A quoted value runs to its closing quote; a bare one stops at whitespace and code punctuation.
        # Never across a newline: `Password:` ending a line is a label, not an assignment.
        r"(?P<quote>[\"'])?(?P<value>(?(quote)[^\"'\n]{1,200}|[^\s\"'`,;(){}\[\]<>]{1,200}))(?(quote)(?P=quote))"
    )


# The largest private-key blocks (PGP keys with subkeys) stay well under this many characters.
_PEM_MAX = 20_000
# The lines of a block cut short: base64 (a whole line of it), blank, or `Proc-Type: ...`-style headers,
# split by real newlines or by the `\n` escapes of a JSON string. A line of prose ends it.
_PEM_BODY = re.compile(
    r"(?:(?:\r?\n|(?:\\r)?\\n)[ \t]*(?:[A-Za-z0-9+/=]*[ \t]*(?=\r?\n|(?:\\r)?\\n|\"|\Z)|[A-Za-z-]+: [^\r\n\\]*))*"
)


def _pem_span(match: re.Match[str]) -> tuple[int, int]:
    # The END line is looked up with str.find: a lazy `.*?-----END` would rescan the rest of the text for
    # every BEGIN that has none.
    text = match.string
    end_line = f"-----END {match.group('label')}-----"
    found = text.find(end_line, match.end(), match.end() + _PEM_MAX)
    if found != -1:
        return match.start(), found + len(end_line)
    body = _PEM_BODY.match(text, match.end())
    return match.start(), body.end() if body else match.end()


def _json_string_span(match: re.Match[str]) -> tuple[int, int] | None:
    close = match.string.find('"', match.end(), match.end() + _PEM_MAX)
    return None if close == -1 else (match.end(), close)


_OWN_SPECIFIC: tuple[Form, ...] = (
    Form("gcp_service_account_key", re.compile(r'"private_key"\s*:\s*"(?=-----BEGIN)'), _json_string_span),
    # The whole block: its BEGIN line, body and END line.
    Form("private_key", re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"), _pem_span),
    # loopmem.tenancy.services.api_key_create: "lm_" + secrets.token_urlsafe(32), always 43 characters.
    Form("loopmem_api_key", _token("lm_", rf"[{_T}]{{43}}"), _where()),
    Form("anthropic_key", _token("sk-ant-", rf"[{_T}]{{32,}}"), _where()),
    Form(
        "openai_key",
        _token("sk-", rf"(?!ant-)(?:proj-|svcacct-|admin-)?[{_T}]{{32,}}"),
        _where(check=_mixed_alnum),
    ),
    Form("npm_token", _token("npm_", r"[A-Za-z0-9]{36}"), _where()),
    # Formats the maintained rules (loopmem.secret_guard.rules) and detect-secrets miss, each from its provider's
    # documentation: crates.io API tokens ("cio" + 32, doc.rust-lang.org/cargo/reference/registry-authentication);
    # HashiCorp Vault service, batch and recovery tokens (developer.hashicorp.com/vault/docs/concepts/tokens);
    # Doppler's personal, service, service-account, SCIM, audit and CLI tokens (docs.doppler.com, "Token
    # formats"); Resend API keys (resend.com/docs); Mapbox secret tokens (docs.mapbox.com, "Access tokens");
    # Tencent Cloud SecretIds and Alibaba Cloud AccessKey IDs, which like AWS key ids name a key pair's secret
    # half; Discord webhook URLs, which post without any other credential (discord.com/developers/docs).
    Form("crates_io_token", _token("cio", r"[A-Za-z0-9]{32}"), _where()),
    Form("vault_token", _token(r"hv[sbr]\.", rf"[{_T}]{{24,}}"), _where()),
    Form(
        "doppler_token",
        re.compile(
            r"(?<![A-Za-z0-9_-])dp\.(?:pt|st|sa|scim|audit|ct)\.(?:[a-z0-9_-]{2,35}\.)?[A-Za-z0-9]{40,44}"
            r"(?![A-Za-z0-9])"
        ),
        _where(),
    ),
    Form("resend_api_key", _token("re_", r"[A-Za-z0-9]{8}_[A-Za-z0-9]{24}"), _where()),
    Form("mapbox_secret_token", _token(r"sk\.eyJ", rf"[{_T}]{{10,}}\.[{_T}]{{10,}}"), _where()),
    Form("tencent_secret_id", _token("AKID", r"[A-Za-z0-9]{32}"), _where(check=_mixed_alnum)),
    Form("alibaba_access_key_id", _token("LTAI", r"[A-Za-z0-9]{12,20}"), _where(check=_mixed_alnum)),
    Form(
        "discord_webhook",
        re.compile(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{17,20}/[A-Za-z0-9_-]{60,68}"),
        _where(),
    ),
    # Heroku's API keys from `heroku auth:token` and `heroku authorizations:create` are bare UUIDs
    # (devcenter.heroku.com/articles/authentication); like gitleaks' heroku rule, one is a key only beside
    # the word "heroku", and here also a word for a credential between the two on the same line. A UUID
    # named as an app's, dyno's or release's id is not one.
    Form("heroku_api_key", re.compile(r"(?i)heroku(?=[^\n]{0,100})"), _heroku_key, keywords=("heroku",)),
    # A PuTTY private key file (PPK v2 and v3, the.earth.li/~sgtatham/putty/latest/htmldoc/AppendixC.html): from
    # its header to its closing `Private-MAC` line.
    Form(
        "private_key",
        re.compile(r"PuTTY-User-Key-File-\d: [^\n]{1,100}(?:\r?\n[A-Za-z0-9+/=:\- @.]{0,200}){0,80}"),
        _where(),
    ),
    # .npmrc: `//registry.example.com/:_authToken=<token>`, whatever the registry's token looks like (npm_,
    # a UUID, base64, a JWT); `${NPM_TOKEN}` and `<token>` are not tokens.
    Form("npm_token", re.compile(r"_authToken=(?P<value>[A-Za-z0-9._~+/=-]{8,512})"), _where("value")),
    Form("google_api_key", _token("AIza", rf"[{_T}]{{35}}"), _where()),
    Form("github_token", _token("github_pat_", r"[A-Za-z0-9_]{22,}"), _where()),
    Form("stripe_key", _token("[sr]k_", r"(?:live|test)_[0-9a-zA-Z]{24,}"), _where()),
    Form(
        "jwt",
        _token("eyJ", rf"[{_T}]{{8,}}\.[{_T}]{{2,}}\.[{_T}]*"),
        _where(check=_is_jwt),
    ),
    Form("azure_storage_key", re.compile(r"AccountKey=([A-Za-z0-9+/]{20,}={0,2})"), _where(1)),
    Form("azure_shared_access_key", re.compile(r"SharedAccessKey=([A-Za-z0-9+/]{20,}={0,2})"), _where(1)),
    Form("azure_sas_signature", re.compile(r"sig=(?<=[?&]sig=)([A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})"), _where(1)),
    Form(
        "payment_card",
        re.compile(r"\d(?<![\w.+-]\d)(?:[ -]?\d){12,18}(?![\w-]|\.\d)"),
        _where(check=_is_card_number),
    ),
    Form(
        "iban",
        re.compile(
            r"[A-Z][A-Z](?<![A-Za-z0-9][A-Z][A-Z])\d\d(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?(?![A-Za-z0-9])"
        ),
        _iban_span,
    ),
    Form(
        "us_ssn",
        re.compile(
            r"(?i)\b(?:ssn|ss\#|social[ -]security(?:[ -](?:number|no\.?|\#))?)[ \t]*(?:\#|no\.?|number)?"
            r"[ \t]*[:=\#-]?[ \t]*(?:is[ \t]+)?(?P<ssn>\d{3}-\d{2}-\d{4}|\d{3} \d{2} \d{4}|\d{9})(?![\d-])"
        ),
        _where("ssn", _is_ssn),
        keywords=("ssn", "ss#", "social"),
    ),
)

# Generic ones come last: when a span is also a specific kind (`password = "sk-..."`), the specific wins.
_OWN_GENERIC: tuple[Form, ...] = (
    Form(
        "url_password",
        # The userinfo runs to the last `@` before a host: a password written raw in a DSN keeps the `?`, `#`
        # and `@` that RFC 3986 wants escaped (`etl:Winter1999?@db`, `etl:Ch3l$3@77@db`, `u:a#b?c@db`). A `/`
        # still ends it (a path), and a port followed by a query or fragment is not a password
        # (`https://host:8080?next=a@b.test`).
        re.compile(r"://[^\s:/?#@\"'<>]*:(?P<value>[^\s/\"'<>]+)@(?=[\w\[%])"),
        _where("value", _url_userinfo_password),
    ),
    Form(
        "bearer_token",
        re.compile(r"(?i)\bbearer[ \t]+(?P<value>[A-Za-z0-9._~+/-]{20,}=*)"),
        _where("value", _has_letter_and_digit),
        keywords=("bearer",),
    ),
    Form(
        "password",
        _assignment(r"pass(?:word|wd|phrase)"),
        _where("value", _is_secret_value),
        keywords=("passw", "passphrase"),
    ),
)


# ---------------------------------------------------------------------------------------------------------
# detect-secrets. Its plugins are called directly (`analyze_string`), not through `scan_line` and its global
# settings: no settings to install per call, no verification over the network, no baseline machinery.
# Three of its token plugins are left out for our own patterns above: the JWT, OpenAI and npm regexes
# backtrack quadratically on crafted input (30 KB of repeated `//` took 3.3 s in npm's, repeated `sk-` 2.5 s
# in OpenAI's, repeated `eyJ` 0.6 s in JWT's), and ours catch what they catch in linear time.


@dataclass(frozen=True)
class _Trigger:
    """Where a plugin can match at all: lines where its regex matches or one of its lowercase words occurs
    (found with str.find), or with `both`, lines where each does."""

    regex: re.Pattern[str] | None = None
    words: tuple[str, ...] = ()
    both: bool = False


def _trigger(regex: str | None = None, words: tuple[str, ...] = (), *, both: bool = False) -> _Trigger:
    return _Trigger(re.compile(regex) if regex else None, words, both)


# Each plugin runs only on the lines where its trigger hits. A trigger is a necessary condition of the
# plugin's own regexes, so it loses nothing, and opens with a literal where one exists. The three
# keyword-and-assignment plugins (Cloudant, IBM IAM, SoftLayer) share one: their secrets are runs of 24 or
# more token characters, and each match holds key/pwd/pass/token or, in their URL forms, the service's name.
# Both are needed: log lines are full of long hex ids, code of `password` and `token`.
_KEYWORD_AND_LONG_RUN = _trigger(
    r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{24}", words=("key", "pw", "pass", "token", "cloudant", "softlayer"), both=True
)


@dataclass(frozen=True)
class _Plugin:
    kind: str
    plugin: BasePlugin
    trigger: _Trigger
    # Our own test of a found token, where the plugin's is looser than our rule for that kind.
    confirm: Callable[[str], bool] | None = None


_DETECT_SECRETS: tuple[_Plugin, ...] = (
    _Plugin("aws_access_key", AWSKeyDetector(), _trigger(r"A(?:3T|BIA|CCA|KIA|SIA)", words=("aws",))),
    # Its `AP[0-9A-F]` + 8 form also fits upper-case part numbers (`APEX12345678`).
    _Plugin("artifactory_token", ArtifactoryDetector(), _trigger(r"AKC|AP[0-9A-F]"), confirm=_is_mixed_alnum),
    _Plugin("azure_storage_key", AzureStorageKeyDetector(), _trigger(r"AccountKey=")),
    _Plugin("url_password", BasicAuthDetector(), _trigger(r"://"), confirm=_is_url_password),
    _Plugin("cloudant_credentials", CloudantDetector(), _KEYWORD_AND_LONG_RUN),
    _Plugin("discord_bot_token", DiscordBotTokenDetector(), _trigger(r"\.[a-zA-Z0-9_-]{6}\.")),
    _Plugin("github_token", GitHubTokenDetector(), _trigger(r"gh[pousr]_")),
    _Plugin(
        "gitlab_token", GitLabTokenDetector(), _trigger(r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941")
    ),
    _Plugin("ibm_cloud_iam_key", IbmCloudIamDetector(), _KEYWORD_AND_LONG_RUN),
    _Plugin("ibm_cos_hmac_secret", IbmCosHmacDetector(), _trigger(words=("secret",))),
    _Plugin("mailchimp_key", MailchimpDetector(), _trigger(r"-us[0-9]")),
    _Plugin("private_key", PrivateKeyDetector(), _trigger(r"BEGIN|PuTTY")),
    _Plugin("pypi_token", PypiTokenDetector(), _trigger(r"pypi-")),
    _Plugin("sendgrid_key", SendGridDetector(), _trigger(r"SG\.")),
    _Plugin("slack_token", SlackDetector(), _trigger(words=("xox", "hooks.slack"))),
    _Plugin("softlayer_key", SoftlayerDetector(), _KEYWORD_AND_LONG_RUN),
    _Plugin("square_oauth_secret", SquareOAuthDetector(), _trigger(r"sq0csp-")),
    _Plugin("stripe_key", StripeDetector(), _trigger(r"[rs]k_live_")),
    _Plugin("telegram_bot_token", TelegramBotTokenDetector(), _trigger(r":[0-9A-Za-z_-]{35}")),
    _Plugin("twilio_key", TwilioKeyDetector(), _trigger(r"(?:AC|SK)[a-z0-9]{32}")),
)

_TOKEN_CHAR = re.compile(rf"[{_T}]")
_TOKEN_REST = re.compile(rf"[{_T}]*")
# Plugins report values with the delimiters they matched on (Artifactory's leading `=` or `:`, a quote or
# a space on either side). A trailing `=` stays: it is base64 padding, part of the secret.
_LEADING_DELIMITERS = " \t\r\n\"'=:"
_TRAILING_DELIMITERS = " \t\r\n\"'"


def _widen(text: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """The token around text[start:end], looking back no further than `floor` (a known token boundary)."""
    while start > floor and _TOKEN_CHAR.match(text, start - 1):
        start -= 1
    rest = _TOKEN_REST.match(text, end)
    return start, rest.end() if rest else end


def _plugin_spans(plugin: BasePlugin, lines: str, text: str) -> Iterator[tuple[int, int]]:
    """Where in `text` the plugin's values from `lines` lie: detect-secrets yields values, not positions.

    A token value is sometimes only part of its token (GitHub's plugin yields the bare `ghp` prefix): a
    value inside a longer token is widened to the whole token, kept only if the plugin still recognises
    that token, so a `ghp` inside an ordinary word is not a finding. Values that are not tokens (`BEGIN RSA
    PRIVATE KEY`, a base64 key) are taken as they are. Every occurrence of a value is a finding: a secret is
    no less leaked where it is repeated.
    """
    recognised: dict[str, bool] = {}
    for raw in set(plugin.analyze_string(lines)):
        value = raw.lstrip(_LEADING_DELIMITERS).rstrip(_TRAILING_DELIMITERS)
        if not value:
            continue
        widens = _TOKEN_REST.fullmatch(value) is not None
        covered = 0  # occurrences inside the token just widened are that token: one walk, one check
        at = text.find(value)
        while at != -1:
            start, end = at, at + len(value)
            # A token value is widened both ways; any other value cut short inside a token (Discord's third
            # part is longer than the plugin's regex allows) runs on to the token's end.
            wide = _widen(text, start, end, covered if widens else start)
            covered = wide[1]
            token = text[wide[0] : wide[1]]
            if token not in recognised:
                recognised[token] = wide == (start, end) or any(plugin.analyze_string(token))
            if recognised[token]:
                yield wide
            at = text.find(value, covered)


# ---------------------------------------------------------------------------------------------------------


def _lines_at(text: str, positions: Iterable[int]) -> list[tuple[int, int]]:
    """The (start, end) of each distinct line holding one of `positions`, in order."""
    lines: list[tuple[int, int]] = []
    for pos in sorted(positions):
        if lines and pos <= lines[-1][1]:
            continue
        end = text.find("\n", pos)
        lines.append((text.rfind("\n", 0, pos) + 1, len(text) if end == -1 else end))
    return lines


_keyword_positions = structure.keyword_positions


def _triggered_lines(trigger: _Trigger, text: str, lowered: str | None) -> str:
    """The lines of `text` where `trigger` hits, joined: what its plugin is run on."""
    if trigger.words and lowered is None:
        return text
    regex_lines = _lines_at(text, (m.start() for m in trigger.regex.finditer(text))) if trigger.regex else []
    word_lines = _lines_at(text, _keyword_positions(lowered, trigger.words)) if lowered and trigger.words else []
    lines = set(regex_lines) & set(word_lines) if trigger.both else set(regex_lines) | set(word_lines)
    return "\n".join(text[start:end] for start, end in sorted(lines))


def _candidates(text: str) -> Iterator[tuple[int, Finding]]:
    """Every finding with its detector's rank: a lower rank wins a tie over the same span."""
    lowered: str | None = text.lower()
    # Keyword positions in the lowered text are offsets into `text` only when lowering kept every character
    # one character long (it does not for a few, such as "İ"); otherwise keyword patterns see all lines.
    if lowered is not None and len(lowered) != len(text):
        lowered = None
    rank = 0
    for pattern in _OWN_SPECIFIC:
        for kind, start, end in structure.found(pattern, text, lowered):
            yield rank, Finding(kind, start, end)
        rank += 1
    triggered: dict[_Trigger, str] = {}
    for entry in _DETECT_SECRETS:
        if entry.trigger not in triggered:
            triggered[entry.trigger] = _triggered_lines(entry.trigger, text, lowered)
        if triggered[entry.trigger]:
            for start, end in _plugin_spans(entry.plugin, triggered[entry.trigger], text):
                if entry.confirm is None or entry.confirm(text[start:end]):
                    yield rank, Finding(entry.kind, start, end)
        rank += 1
    for kind, start, end in ids.findings(text):
        yield rank, Finding(kind, start, end)
    rank += 1
    for pattern in _OWN_GENERIC:
        for kind, start, end in structure.found(pattern, text, lowered):
            yield rank, Finding(kind, start, end)
        rank += 1
    for kind, start, end in structure.findings(text, lowered):
        yield rank, Finding(kind, start, end)
    rank += 1
    for kind, start, end in seed_phrase.findings(text):
        yield rank, Finding(kind, start, end)
    rank += 1
    # The maintained rules last: where one of ours reports the same span, its kind names it.
    for kind, start, end in rules.findings(text):
        # The rules' generic forms take what documentation writes for a secret (`user:password@`) as one.
        if not structure.stands_for_a_secret(text[start:end]):
            yield rank, Finding(kind, start, end)


def _masked(value: str) -> bool:
    """A token of the right prefix filled with one character (`ghp_xxxxxxxx…`, `sk_live_0000…`): a mask or a
    placeholder. Random text of 12 characters carries 3 bits a character or more; these under 2. Numbers (a
    card, a PIN) are judged by their checksums and lengths instead."""
    return len(value) >= 12 and any(c.isalpha() for c in value) and structure.shannon(value) < 2.0


def scan(text: str) -> list[Finding]:
    """The secrets in `text`, by start offset; a finding inside another one's span is dropped."""
    ordered = sorted(
        (rf for rf in _candidates(text) if not _masked(text[rf[1].start : rf[1].end])),
        key=lambda rf: (rf[1].start, -rf[1].end, rf[0]),
    )
    findings: list[Finding] = []
    reach = -1
    for _rank, finding in ordered:
        # Sorted by start, then widest first: a finding ending within the furthest reach so far is inside
        # one already kept (a PEM block inside a service-account key, a plugin's partial match of a JWT).
        if finding.end <= reach:
            continue
        findings.append(finding)
        reach = finding.end
    return findings


def redact(text: str, findings: Iterable[Finding]) -> str:
    """`text` with each finding's span replaced by `[REDACTED:<kind>]`; overlapping spans become one.

    A merged span is labelled with the kind of its widest finding.
    """
    merged: list[tuple[int, int, str, int]] = []  # start, end, kind, width of the finding named
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if merged and f.start < merged[-1][1]:
            start, end, kind, width = merged[-1]
            if f.end - f.start > width:
                kind, width = f.kind, f.end - f.start
            merged[-1] = (start, max(end, f.end), kind, width)
        else:
            merged.append((f.start, f.end, f.kind, f.end - f.start))
    parts: list[str] = []
    cursor = 0
    for start, end, kind, _width in merged:
        parts.append(text[cursor:start])
        parts.append(f"[REDACTED:{kind}]")
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)
