"""Secrets known by where they stand, not by their shape: a value under a name that says it is secret, and a
password, PIN or key told in a sentence.

A provider's token has a format a rule can name (loopmem.secret_guard.rules); a database password, a signing secret
or the wifi password has none. What gives it away is its place: `DB_PASSWORD=…`, `"signingSecret": "…"`,
`<password>…</password>`, `--api-token …`, `?appid=…`, `Authorization: SSWS …`, a `.pgpass` line, or "mein
Passwort ist …". Each form below finds such a place, and a value test decides whether what stands there is a
secret or a word, a setting, a reference or a placeholder:

- under a key, token or secret's name, the value must look random (`looks_random`: long, two classes of
  character, the spread of random text);
- under a password's name, it must look like a password a person chose (`could_be_password`: not a word of the
  language, not code, not a placeholder);
- told in prose, the same, and a PIN is 4 to 8 digits.

The names are read in English, German, French and Spanish. The forms are tried only where one of their
keywords occurs (found with str.find on the lowered text), and every repetition in them is bounded, so a
crafted text costs linear time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# --- What a value is ---------------------------------------------------------------------------------------

# Values that stand for a secret without being one: templates, masks, references, obvious placeholders. A YAML
# tag (`!vault |`, `!Ref DbPassword`, `!Base64`, `!env_var`) is a word after the `!`; a random value may begin
# with `!` too.
PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \$\{[\w.:-]+\} | (?-i:\$[A-Z_][A-Z0-9_]* | \$[a-z_]+) | \$\(.*\) | \{\{.*\}\} | \{[\w.]*\} | <[^>]*>
      | %\(?\w*\)?s | %env\(.*\)% | !!?[A-Za-z]+\d{0,2}(?:_[a-z]+)*(?:\s.*)?
      | [*x•#._-]+
      | (?:your|example|sample|dummy|placeholder|redacted|todo|fixme|changeme|secret-here).* | none | null | undefined
      | .*(?:\.\.\.|…)
    )$"""
)
# Bare (unquoted) values shaped like a variable or constant name are references in code, not secrets; a
# word ending in a colon is the next label of a form (`Password: Email: bob@example.com`).
IDENTIFIER = re.compile(
    r"^(?:[a-z_]+|[A-Z_]+|[a-z]{2,}(?:[A-Z][a-z]{2,})+|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z_-]+:)$"
)
# What documentation writes in a secret's place (`postgres://user:password@localhost`).
SECRET_WORDS = frozenset({"password", "passwd", "pass", "pwd", "pw", "secret", "token", "key"})


def char_classes(value: str) -> int:
    """How many of lower case, upper case past the first letter, digits and symbols `value` holds."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value[1:])  # A capitalised word is one class, not two.
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() and not c.isspace() for c in value)
    )


# Keys made to be published: Stripe's, Clerk's and Paystack's `pk_live_…`/`pk_test_…`, Mapbox's `pk.…`.
_PUBLISHABLE = re.compile(r"^pk[._]")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def stands_for_a_secret(value: str) -> bool:
    """A placeholder or the word itself (`password`, `<token>`, `${API_KEY}`): what a secret's place holds in
    documentation and templates."""
    return bool(PLACEHOLDER.match(value)) or value.lower() in SECRET_WORDS


def shannon(value: str) -> float:
    """Bits of entropy a character of `value` carries, by its own character frequencies."""
    counts = [value.count(c) for c in set(value)]
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts)


def looks_random(value: str) -> bool:
    """The value of a key or token, not a word, a setting or a reference: at least 12 characters with no
    whitespace, not words, two classes of character and at least 3 bits a character (hex carries 4 at most,
    base64 6; `created_at_2024` 3.4, `read-only` 2.9)."""
    if len(value) < 12 or stands_for_a_secret(value) or _PUBLISHABLE.match(value):
        return False
    if re.search(r"\s|\\[nrt]|://", value):
        return False
    words = value.strip(".,;:!?")
    if not any(c.isdigit() for c in value) and re.fullmatch(r"[A-Za-z]+(?:[ _.:-][A-Za-z]+)*", words):
        return False  # words: `read_only`, `Bearer`, `AES-GCM`, `authorization:`
    return char_classes(value) >= 2 and shannon(value) >= 3.0


def _is_word(value: str) -> bool:
    # A word (or hyphenated words) of one case is the language's, not a password: `stored`, `case-sensitive`,
    # `abgelaufen`, `Trop`.
    return bool(re.fullmatch(r"[^\W\d_]+(?:[-'][^\W\d_]+)*", value)) and (value[1:].islower() or value.isupper())


def could_be_password(value: str, *, quoted: bool = False) -> bool:
    """A password a person chose: at least 6 characters, not a word, not code, a URL, an address or a
    placeholder, and two classes of character (or, quoted, 12 characters: `"correct horse battery staple"`)."""
    if len(value) < 6 or stands_for_a_secret(value) or _is_word(value):
        return False
    if re.search(r"://|[(){}\[\]]|^%", value) or re.fullmatch(r"[\w.+-]+@[\w-]+\.[\w.-]+", value):
        return False
    return char_classes(value) >= 2 or (quoted and len(value) >= 12)


# --- Names ---------------------------------------------------------------------------------------------------

_SEGMENTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# Words that make a name a secret's: `AWS_SECRET_ACCESS_KEY`, `stripeKey`, `signing_secret`, `x-api-key`, `pwd`.
_SECRET_WORDS = frozenset(
    {"secret", "secrets", "token", "tokens", "key", "keys", "apikey", "credential", "credentials", "auth", "sig"}
    | {"signature", "appid", "salt", "pepper", "apitoken", "accesstoken", "privatekey", "clientsecret", "pat"}
)
_PASSWORD_WORDS = ("password", "passwd", "passphrase", "passwort", "kennwort", "contrasena", "motdepasse")
_PASSWORD_SEGMENTS = frozenset({"pass", "pwd", "pw", "pin", "mdp", "clave"})
# Words that make a `key` a secret one: `API_KEY`, `signing_key`, `licenseKey`, `master_key`. `key` alone names
# sort keys, cache keys and dictionary keys too.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "private", "signing", "encryption", "master", "license", "licence", "client", "app"}
    | {"service", "account", "deploy", "ssh", "admin", "write", "read", "server", "webhook", "hmac", "aes", "jwt"}
    | {"session", "storage", "secret", "auth", "root", "rest", "live", "prod", "production", "publishable"}
)
# A name whose last word says what the value is about, not the secret: `token_ttl`, `api_key_id`, `key_path`.
_ABOUT = frozenset(
    {"id", "ids", "name", "names", "path", "file", "dir", "url", "uri", "type", "ttl", "length", "len", "size"}
    | {"count", "version", "env", "field", "header", "prefix", "format", "ref", "hash", "policy", "rotation"}
    | {"expiry", "expires", "expiration", "timeout", "mode", "enabled", "required", "min", "max", "label", "hint"}
    | {"reset", "endpoint", "host", "region", "scope", "scopes", "provider", "alias", "index", "limit", "public"}
    | {"fingerprint", "algorithm", "algo", "usage", "user", "username", "login", "email", "location", "store"}
)
# Words between a noun and its verb that say the value is about the secret, not the secret: "the key
# fingerprint is …", "the token type is …".
_ABOUT_VALUE = frozenset(
    {"fingerprint", "id", "ids", "name", "path", "file", "url", "type", "length", "size", "format", "hash"}
    | {"prefix", "header", "policy", "expiry", "expiration", "ttl", "rotation", "field", "version", "algorithm"}
)
# Names of values meant to be seen: `STRIPE_PUBLISHABLE_KEY`, `NEXT_PUBLIC_…`, a WireGuard `PublicKey`.
_PUBLIC_WORDS = frozenset({"public", "publishable", "pub", "pk"})


def secret_name(name: str) -> str | None:
    """What a name says its value is: "password", "key" (a key, token or secret), or None (not a secret's name:
    `token_ttl`, `sort_key`, `publicKey`)."""
    lowered = name.lower().replace("ñ", "n").replace(" ", "")
    words = [word.lower() for word in _SEGMENTS.findall(name.replace("ñ", "n"))]
    if not words or words[-1] in _ABOUT or _PUBLIC_WORDS & set(words):
        return None
    if any(word in lowered for word in _PASSWORD_WORDS) or _PASSWORD_SEGMENTS & set(words):
        return "password"
    found = _SECRET_WORDS & set(words)
    if not found:
        return None
    if found <= {"key", "keys"} and not _KEY_QUALIFIERS & set(words):
        return "bare key"
    return "key"


def _value_ok(kind_of_name: str | None, value: str, *, quoted: bool) -> bool:
    if kind_of_name == "password":
        return could_be_password(value, quoted=quoted)
    if kind_of_name == "key":
        return looks_random(value)
    if kind_of_name == "bare key":  # a key of the token alphabet; a UUID there is an idempotency or cache key
        token = re.fullmatch(r"[A-Za-z0-9+/=_-]{16,}", value) and not _UUID.match(value)
        return bool(token) and looks_random(value) and shannon(value) >= 3.5
    return False


# --- The forms ---------------------------------------------------------------------------------------------

Locate = Callable[[re.Match[str]], tuple[int, int] | None]


@dataclass(frozen=True)
class Form:
    """A way a secret is written: a regex, where in a match the secret lies (`locate`; None: not a secret after
    all) and, for keyword-led forms, the keywords every match starts with. loopmem.secret_guard.scan's own patterns
    are forms too."""

    kind: str
    regex: re.Pattern[str]
    locate: Locate
    # Lowercase. When given, the regex is tried only where one of them occurs (found with str.find, far cheaper
    # than a case-insensitive regex trying every position); otherwise over the whole text, which is cheap
    # because such a regex opens with a literal, a digit or a capital.
    keywords: tuple[str, ...] = ()
    # The kind of a match, where the form finds several (a PIN, a password, a key told in prose).
    kind_of: Callable[[re.Match[str]], str] | None = None
    # A form without keywords runs only on a text where this cheap search finds something.
    requires: re.Pattern[str] | None = None


_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*$")
_QUOTED_OR_BARE = (
    r"(?P<quote>[\"'`])?(?P<value>(?(quote)[^\"'`\n]{1,2000}|[^\s\"'`,;&@(){}\[\]<>]{1,2000}))(?(quote)(?P=quote))"
)
_KEYWORDS = ("secret", "token", "key", "credential", "pwd", "auth", "pass", "sig", "salt", "kennwort", "clave", "pat")


def _name_at(match: re.Match[str]) -> str:
    """The whole name a keyword-led match sits in: the name characters before the keyword and the match's own."""
    head = _NAME_CHARS.search(match.string, max(0, match.start() - 60), match.start())
    return (head.group(0) if head else "") + match.group("name")


def _assigned(match: re.Match[str]) -> tuple[int, int] | None:
    value, quoted = match.group("value"), match.group("quote") is not None
    if len(value) < 4:
        return None
    if not quoted:
        following = match.string[match.end("value") : match.end("value") + 1]
        if following in ("(", "[") or IDENTIFIER.match(value):
            return None  # `password=get_password()`, `token = settings.TOKEN`
    name = _name_at(match)
    name_start = match.start() - (len(name) - len(match.group("name")))
    if match.string[name_start - 1 : name_start] == ":":
        return None  # a segment of a colon path, not a name: `arn:aws:secretsmanager:…:secret:prod/db`
    return match.span("value") if _value_ok(secret_name(name), value, quoted=quoted) else None


def _named(match: re.Match[str]) -> tuple[int, int] | None:
    value, quoted = match.group("value"), bool(match.groupdict().get("quote"))
    return match.span("value") if _value_ok(secret_name(match.group("name")), value, quoted=quoted) else None


def _random_argument(value: str) -> bool:
    # Higher bars than under a secret's name, since nothing names it: 3.5 bits a character, and not a UUID
    # (a resource's id).
    return looks_random(value) and shannon(value) >= 3.5 and not _UUID.match(value)


def _password_value(match: re.Match[str]) -> tuple[int, int] | None:
    return match.span("value") if could_be_password(match.group("value")) else None


_FORMS: tuple[Form, ...] = (
    # `name = value`, `name: value`, `"name": "value"`, `NAME=value`, `name => value`, `name := value`; the
    # regex starts at the name's secret word, wherever it sits (`AWS_SECRET_ACCESS_KEY`, `dbPassword`).
    Form(
        "secret_assignment",
        re.compile(
            rf"(?i)(?P<name>(?:{'|'.join(_KEYWORDS)})[A-Za-z0-9_.ñ-]{{0,40}})[\"']?[ \t]*(?:=>|:=|=|:)[ \t]*"
            rf"(?:\[\]byte\(|b(?=[\"']))?{_QUOTED_OR_BARE}"
        ),
        _assigned,
        _KEYWORDS,
    ),
    # XML: `<password>…</password>`, `<add key="SmtpPassword" value="…"/>`.
    Form(
        "secret_assignment",
        re.compile(r"<(?P<name>[A-Za-z][\w.:-]{0,40})>(?P<value>[^<>\s]{4,200})</(?P=name)>"),
        _named,
        ("<",),
    ),
    Form(
        "secret_assignment",
        re.compile(r"(?i)\bkey=\"(?P<name>[\w.:-]{1,60})\"[ \t]+value=\"(?P<value>[^\"\n]{4,200})\""),
        _named,
        ("key=",),
    ),
    # Code that sets a constant by name: `define('AUTH_KEY', '…')`, `os.environ.setdefault("API_TOKEN", "…")`.
    Form(
        "secret_assignment",
        re.compile(
            r"(?i)(?:define|setenv|putenv|setdefault|set)\([ \t]*[\"'](?P<name>[\w.-]{1,60})[\"'][ \t]*,[ \t]*"
            r"(?P<quote>[\"'])(?P<value>[^\"'\n]{4,200})(?P=quote)"
        ),
        _named,
        ("define", "setenv", "putenv", "setdefault", "set("),
    ),
    # A value set by name on a command line: `aws configure set aws_secret_access_key …`, `setx API_TOKEN …`.
    Form(
        "secret_assignment",
        re.compile(r"(?i)\b(?:set|setx|config:set)[ \t]+(?P<name>[\w.-]{1,60})[ \t]+" + _QUOTED_OR_BARE),
        _named,
        ("set",),
    ),
    # Command-line flags: `--token …`, `--api-key=…`, `--client-secret '…'`, `--password …`.
    Form(
        "secret_assignment",
        re.compile(r"(?i)(?<![\w-])--?(?P<name>[a-z][a-z0-9-]{0,30})(?:=|[ \t]+)" + _QUOTED_OR_BARE),
        _named,
        ("-",),
    ),
    # MySQL's `-pPASSWORD` (no space) and sshpass's `-p PASSWORD`.
    Form(
        "password",
        re.compile(
            r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb|sshpass)\b[^\n]{0,200}?[ \t]-p[ \t]?"
            r"(?P<quote>[\"'])?(?P<value>[^\s\"']{4,64})"
        ),
        lambda match: match.span("value") if could_be_password(match.group("value")) else None,
        ("mysql", "mariadb", "sshpass"),
    ),
    # `user:password` given to a client on its command line: curl's and wget's `-u`/`--user`, httpie's `-a`.
    Form(
        "password",
        re.compile(
            r"(?<![\w-])(?:-u|-a|--user|--auth|--http-user)(?:=|[ \t]+)[\"']?[^\s:\"']{1,64}:"
            r"(?P<value>[^\s\"']{4,128})"
        ),
        _password_value,
        ("-u", "-a", "--user", "--auth", "--http-user"),
    ),
    # A key handed to an SDK's client in code: `cohere.Client("…")`, `new Resend('…')`,
    # `SearchClient.create('APP_ID', '…')`. Only a value with the spread of a random key (`_random_argument`).
    Form(
        "secret_argument",
        re.compile(
            r"(?:(?:Client|client|Api|API|Auth|auth|Sdk|SDK|Login|login)[\w.]{0,40}|new[ \t]+[A-Z]\w{0,40})"
            r"\([ \t]*(?:[\"'][^\"'\n]{1,100}[\"'][ \t]*,[ \t]*){0,2}[\"'](?P<value>[A-Za-z0-9_.+/=-]{20,300})[\"']"
        ),
        lambda match: match.span("value") if _random_argument(match.group("value")) else None,
        ("client", "api", "auth", "sdk", "login", "new"),
    ),
    # A URL's query parameter: `?appid=…`, `&api_key=…`, `&sig=…`.
    Form(
        "url_secret_parameter",
        re.compile(r"[?&](?P<name>[A-Za-z][\w.-]{0,30})=(?P<value>[^&#\s\"'<>]{12,300})"),
        _named,
        ("?", "&"),
    ),
    # Any Authorization scheme: `Basic …`, `token …`, `SSWS …`, `key=…`, `Bearer …`.
    Form(
        "authorization_header",
        re.compile(
            r"(?i)(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:[A-Za-z][\w-]{0,24}[ =])?[ \t]*"
            r"(?P<value>[A-Za-z0-9._~+/=:$-]{12,2000})"
        ),
        lambda match: match.span("value") if looks_random(match.group("value")) else None,
        ("authorization",),
    ),
    # A .pgpass line (`host:port:database:user:password`) and a .netrc entry.
    Form(
        "password",
        re.compile(
            r"(?m)(?<![\w.:/-])(?P<host>[A-Za-z*][\w.*-]{0,100}):(?:\d{1,5}|\*):[^:\s]{1,64}:[^:\s]{1,64}:"
            r"(?P<value>[^\s:]{4,128})(?=\s|$)"
        ),
        _password_value,
        requires=re.compile(r":(?:\d{1,5}|\*):[^:\s]{1,64}:[^:\s]{1,64}:"),
    ),
    Form(
        "password",
        re.compile(r"(?i)\bmachine\s+\S{1,200}\s+login\s+\S{1,200}\s+password\s+(?P<value>\S{4,128})"),
        _password_value,
        ("machine",),
    ),
)


# --- Told in prose -------------------------------------------------------------------------------------------

# The noun, then at most four words ("for the staging db", "meiner EC-Karte", "de la box"), then the verb or a
# colon, then the value (quoted, a passphrase of several words, or one run of non-space). Without a verb the
# value must follow the noun at once and look stronger (`_told`).
_PASSWORD_NOUNS = (
    r"pass(?:word|wd|code|phrase)?|pw|pwd|kennwort|passwort|mot de passe|mdp|contrase(?:ñ|n)a|clave(?: de acceso)?"
    r"|senha|parola d'ordine"
)
_PIN_NOUNS = (
    r"pin(?:-code| code|-nummer|nummer)?|code pin|c(?:ó|o)digo pin|geheimzahl|code secret|n(?:ú|u)mero secreto"
    r"|(?:door|gate|alarm|access|entry|garage|safe) code|t(?:ü|u)rcode|zugangscode|alarmcode"
    r"|code (?:de la porte|d'acc(?:è|e)s|d'entr(?:é|e)e|de l'alarme|porte)|c(?:ó|o)digo (?:de (?:la )?puerta|de acceso)"
    r"|digicode|(?:backup|recovery|lockbox) code|c(?:ó|o)digo de (?:respaldo|recuperaci(?:ó|o)n)"
)
_KEY_NOUNS = (
    r"(?:api|access|secret|private|auth|bot|admin|service|app) ?(?:key|token)|key\d?|token|secret|credential"
    r"|cl(?:é|e)(?: (?:api|d'api|secr(?:è|e)te|priv(?:é|e)e|d'acc(?:è|e)s))?|chiave|chave|schl(?:ü|u)ssel"
    r"|(?:api|access)-?(?:schl(?:ü|u)ssel|token)"
)
# A verb is a whole word after a space; a colon or an equals sign may follow the noun's words at once.
_VERB = (
    r"(?:[ \t]+(?:is|was|will be|ist|lautet|war|est|était|c'est|es|era|sigue siendo|sont|sind|are|è|é|sono|são)"
    r"(?!\w)(?:[ \t]*:)?|[ \t]*[:=])"
    r"(?:[ \t]+(?:now|still|set to|just|jetzt|noch|immer noch|maintenant|encore|ahora|todavía)(?!\w))?"
)
_BETWEEN = r"(?P<between>(?:[ \t]+[^\s.,;:!?=\"']{1,25}(?=[\s:=])){0,6}?)"
_VALUE = (
    r"(?P<digits>\d(?:[ -]?\d){3,7})(?![\w-])|"
    r"[\"'\u201c\u201d\u201e\u00ab\u2039`](?P<quoted>[^\"'\u201c\u201d\u201e\u00bb\u203a`\n]{3,300})"
    r"[\"'\u201c\u201d\u201e\u00bb\u203a`]|(?P<value>[^\s\"'\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a`]{3,300})"
)
_PROSE = re.compile(
    rf"(?i)(?<!\w)(?P<noun>{_PIN_NOUNS}|{_PASSWORD_NOUNS}|{_KEY_NOUNS})s?(?!\w)"
    rf"(?:{_BETWEEN}{_VERB}(?:[ \t]*\r?\n){{0,3}}[ \t]*(?:{_VALUE})|[ \t]+(?P<bare>[^\s\"'`]{{6,300}}))"
)
_PIN_NOUN = re.compile(_PIN_NOUNS, re.IGNORECASE)
_KEY_NOUN = re.compile(_KEY_NOUNS, re.IGNORECASE)
_PROSE_KEYWORDS = (
    *("pass", "pw", "kennwort", "mot de passe", "mdp", "contrase", "clave", "pin", "geheimzahl", "code"),
    *("secret", "key", "token", "credential", "türcode", "turcode", "zugangscode", "alarmcode", "código", "codigo"),
    *("número", "numero", "door", "gate", "alarm", "access", "entry", "garage", "safe", "api", "private", "auth"),
    *("bot", "admin", "service", "app", "senha", "parola", "digicode", "backup", "recovery", "lockbox", "clé", "cle"),
    *("chiave", "chave", "schlüssel", "schlussel"),
)


def _told(match: re.Match[str]) -> tuple[int, int] | None:
    """The span of a password, PIN or key told in prose, or None."""
    group = next(name for name in ("digits", "quoted", "value", "bare") if match.group(name) is not None)
    start, end = match.span(group)
    # The value without the sentence's punctuation is what is judged; the span keeps it (`Sunshine2024!` may
    # end with its `!`: refusing or redacting one character more costs nothing, one fewer leaks it).
    value = match.group(group) if group == "quoted" else match.group(group).rstrip(".,;:!?)]}")
    if not value:
        return None
    noun = " ".join(match.group("noun").lower().split())
    between = {word.lower() for word in (match.group("between") or "").split()}
    if between & (_ABOUT_VALUE | _PUBLIC_WORDS):
        return None  # "the key fingerprint is …", "the publishable key is …"
    if group == "value":
        following = match.string[start + len(value) : start + len(value) + 1]
        if following in ("(", "[") or IDENTIFIER.match(value):
            return None  # `password = var.db_password`, `password=new_password`
    if _PIN_NOUN.fullmatch(noun):  # 4 to 8 digits, spaced or dashed as told ("6 1 2 4")
        digits = value.rstrip("#*")
        bare = re.sub(r"[ -]", "", digits)
        return (start, start + len(digits)) if bare.isdigit() and 4 <= len(bare) <= 8 else None
    if group == "digits":  # a run of digits told as a password or a key is a number, not one
        return None
    if re.fullmatch(r"key\d?", noun):  # a bare "key": an idempotency key, a cache key, a sort key too
        return (start, end) if _value_ok("bare key", value, quoted=False) else None
    if _KEY_NOUN.fullmatch(noun):  # a key or token ends at an `@` (`x-token:ghp_…@github.com/…` is a URL)
        value = value.split("@", 1)[0]
        return (start, start + len(value)) if looks_random(value) and len(value) >= 16 else None
    if group == "quoted":
        words = value.split()
        return (start, end) if could_be_password(value, quoted=True) or len(words) >= 3 else None
    if group == "bare":  # no verb: "Kennwort IchLiebeSchatz99?", "login dana / pw ILoveSunshine10+"
        mixed = char_classes(value) >= 3 or (
            len(value) >= 8 and re.search(r"\d", value) and re.search(r"[^\W\d_]", value)
        )
        return (start, end) if could_be_password(value) and mixed else None
    return (start, end) if could_be_password(value) else None


def _told_kind(match: re.Match[str]) -> str:
    noun = " ".join(match.group("noun").lower().split())
    if _PIN_NOUN.fullmatch(noun):
        return "pin"
    return "secret_told" if _KEY_NOUN.fullmatch(noun) else "password"


# A passphrase of plain words told after its name, unquoted: "the passphrase is tundra biscuit meadow saffron",
# "die Passphrase lautet …", "la phrase secrète est …", "la frase de contraseña es …" (quoted ones are _told's).
# A sentence goes on with the words sentences are built with; a passphrase is words chosen at random. So the
# value is the words after the verb up to the first closed-class word of the four languages (an article, a
# preposition, a pronoun, an auxiliary, a common adverb) or punctuation, and it takes four of them (three joined
# by hyphens or dots, which no sentence is). What is said of a passphrase ("is stored in …", "ist im Tresor
# hinterlegt", "est changée chaque mois") opens with a participle or adjective from the lists below or runs into a
# closed-class word first.
_PASSPHRASE_NOUNS = (
    r"pass[ -]?phrase|passsatz|kennsatz|phrase (?:secr(?:è|e)te|de passe)"
    r"|frase (?:de (?:contrase(?:ñ|n)a|paso|acceso)|secreta|clave)"
)
_PASSPHRASE = re.compile(
    rf"(?i)(?<!\w)(?P<noun>{_PASSPHRASE_NOUNS})s?(?!\w){_BETWEEN}{_VERB}[ \t]*"
    r"(?P<words>[^\W\d_]{2,30}(?:(?:[ \t]+|[-.])[^\W\d_]{2,30}){2,11})"
)


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_CLOSED_CLASS = _word_set(
    # English
    "the a an and or but if so as at by for from in into of on onto to with without within about after before"
    " under over than then that this these those there here it its is are was were be been being has have had do"
    " does did not no nor yet also still now just only very too quite really always never often already again"
    " somewhere anywhere everywhere nowhere elsewhere i you he she we they me him her us them my your his our"
    " their which who whom whose what when where why how all any each every some both either neither many much"
    " more most few less one two three four five six seven eight nine ten can could will would shall should may"
    " might must"
    # German
    " der die das den dem des ein eine einen einem einer eines und oder aber wenn dass im am an auf aus bei mit"
    " nach von vor zu zum zur für über unter ist sind war waren wird werden wurde nicht kein keine auch noch schon"
    " jetzt nur sehr immer nie hier dort da es er sie wir ihr ich du mein meine dein deine sein seine unser"
    " unsere wie was wo wer alle jede jeder jedes"
    # French
    " le la les un une des du de et ou mais si que qui dans sur sous avec sans pour par en au aux est sont était"
    " sera pas ne plus aussi encore toujours jamais déjà ici là il elle nous vous ils elles je tu on mon ma mes"
    " ton ta tes son sa ses notre votre leur ce cette ces tout tous toute toutes très bien"
    # Spanish
    " el los las lo unos unas y o pero con sin para por del al es son era será está están ni más también todavía"
    " ya aquí allí él ella nosotros yo tú mi mis tu tus su sus nuestro nuestra muy todo todos toda todas cada"
)
# What a sentence says of a passphrase right after its verb.
_PASSPHRASE_PREDICATES = _word_set(
    "stored saved kept written encrypted hashed required needed optional set unset changed rotated reset expired"
    " shared known unknown printed generated hidden lost forgotten locked protected included attached listed noted"
    " pinned taped managed handled same different long short strong weak secure insecure random correct wrong"
    " valid invalid empty missing new old case unique available"
    " gespeichert hinterlegt notiert geändert geheim sicher lang kurz stark schwach falsch richtig neu alt leer"
    " gleich abgelaufen verschlüsselt"
    " stockée stocké enregistrée enregistré notée noté changée changé modifiée modifié écrite écrit secrète longue"
    " courte forte faible fausse correcte nouvelle vide même chiffrée expirée"
    " guardada guardado anotada anotado cambiada cambiado escrita escrito secreta larga corta fuerte débil"
    " incorrecta correcta nueva vacía misma cifrada caducada"
)


def _passphrase_words(match: re.Match[str]) -> tuple[int, int] | None:
    """The span of a passphrase of plain words told after its name, or None."""
    between = {word.lower() for word in (match.group("between") or "").split()}
    if between & (_ABOUT_VALUE | _PUBLIC_WORDS):
        return None  # "the passphrase length is …"
    start = match.start("words")
    tokens = match.group("words").split()
    if re.search(r"[-.]", tokens[0]):  # joined: `tundra-biscuit-meadow`, whatever the sentence says next
        words = re.split(r"[-.]", tokens[0])
        kept, end = (words, start + len(tokens[0])) if len(words) >= 3 else ([], start)
    else:
        kept, end, at = [], start, start
        for token in tokens:
            at = match.string.index(token, at)
            if re.search(r"[-.]", token) or token.lower() in _CLOSED_CLASS:
                break
            kept.append(token)
            end = at + len(token)
        if len(kept) < 4:
            return None
    if not kept or any(word.lower() in _CLOSED_CLASS for word in kept):
        return None
    if kept[0].lower() in _PASSPHRASE_PREDICATES:
        return None
    one_case = all(w.islower() for w in kept[1:]) and (kept[0].islower() or kept[0][1:].islower())
    title_case = all(w[:1].isupper() and w[1:].islower() for w in kept)
    return (start, end) if one_case or title_case else None


_PROSE_FORMS = (
    Form("password", _PROSE, _told, _PROSE_KEYWORDS, kind_of=_told_kind),
    Form(
        "passphrase",
        _PASSPHRASE,
        _passphrase_words,
        ("passphrase", "pass phrase", "pass-phrase", "passsatz", "kennsatz", "phrase ", "frase "),
    ),
)


# --- Running them ------------------------------------------------------------------------------------------


def keyword_positions(lowered: str, keywords: tuple[str, ...]) -> list[int]:
    """Where any of `keywords` occurs in `lowered`, in order: str.find is far cheaper than a case-insensitive
    regex trying every position."""
    positions: set[int] = set()
    for keyword in keywords:
        at = lowered.find(keyword)
        while at != -1:
            positions.add(at)
            at = lowered.find(keyword, at + 1)
    return sorted(positions)


def found(form: Form, text: str, lowered: str | None) -> Iterator[tuple[str, int, int]]:
    """What `form` finds: at each keyword occurrence (or over the whole text), a match its locate keeps."""
    if form.requires is not None and not form.requires.search(text):
        return
    if not form.keywords or lowered is None:
        matches: Iterator[re.Match[str]] = form.regex.finditer(text)
    else:
        matches = _keyword_matches(form, text, lowered)
    for match in matches:
        span = form.locate(match)
        if span is not None and span[0] < span[1]:
            yield (form.kind_of(match) if form.kind_of else form.kind), *span


def _keyword_matches(form: Form, text: str, lowered: str) -> Iterator[re.Match[str]]:
    """The form's matches starting at its keywords, as finditer would find them: the next one starts after this
    one, kept by its locate or not. Trying every keyword inside a value just matched (`key=key=key=…`) would
    match it again from each: quadratic in the text."""
    resume = 0
    for at in keyword_positions(lowered, form.keywords):
        if at < resume:
            continue
        match = form.regex.match(text, at)
        if match is not None:
            resume = max(match.end(), at + 1)
            yield match


def findings(text: str, lowered: str | None) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of each secret known by its place in `text`. `lowered` is `text.lower()` when lowering
    kept every character one character long (keyword positions are then offsets into `text`), else None."""
    for form in (*_FORMS, *_PROSE_FORMS):
        yield from found(form, text, lowered)
