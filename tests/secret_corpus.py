"""The secret corpus shared by every test of secret handling: fakes of the right shape and benign look-alikes.

The secrets are fakes of the right shape, drawn from a generator seeded per case (so a case's value does not
change when another case is added). Well-known prefixes are joined at run time ("gh" + "p_" ...), so this
file holds no whole token that a push-protection scanner would stop. The detector's own test
(`tests/loopmem/test_secret_scan.py`) and the write-path tests (`tests/privacy/test_secret_write_paths.py`)
read the same cases.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass, field
from typing import Any

from loopmem.secret_guard.scan import Finding

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
LOWER_ALNUM = LOWER + DIGITS
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(seed: str, alphabet: str, n: int) -> str:
    rng = random.Random(seed)
    # Real keys of 20+ characters from a mixed alphabet contain each class; fakes must too, or a check that
    # relies on it would pass or fail by the luck of the draw.
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        classes = [c for c in (UPPER, LOWER, DIGITS) if set(c) & set(alphabet)]
        if n < 8 or all(set(value) & set(c) for c in classes):
            return value


def luhn_complete(seed: str, prefix: str, length: int) -> str:
    rng = random.Random(seed)
    body = prefix + "".join(rng.choice(DIGITS) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:  # doubled: the check digit will sit to the right of these
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def iban(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    check = 98 - int("".join(str(int(ch, 36)) for ch in rearranged)) % 97
    return f"{country}{check:02d}{bban}"


def grouped(value: str, size: int = 4, sep: str = " ") -> str:
    return sep.join(value[i : i + size] for i in range(0, len(value), size))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(seed: str) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": "agent-7", "tenant": "acme", "exp": 1893456000}).encode())
    return f"{header}.{payload}.{rand(seed, URLSAFE, 43)}"


def pem(label: str, seed: str, lines: int = 6) -> str:
    body = "\n".join(rand(f"{seed}{i}", B64, 64) for i in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{rand(seed, B64, 20)}==\n-----END {label}-----"


@dataclass(frozen=True)
class Secret:
    id: str
    kind: str
    text: str
    secret: str


def secret_cases() -> list[Secret]:
    cases: list[Secret] = []

    def add(id: str, kind: str, template: str, secret: str) -> None:
        cases.append(Secret(id, kind, template.format(s=secret), secret))

    # Cloud keys
    add(
        "aws_key_id",
        "aws_access_key",
        "Deploy with access key id {s} in us-east-1, the secret is in the vault.",
        "AK" + "IA" + rand("aws", UPPER + DIGITS, 16),
    )
    # AWS's documented example key. Example keys count as secrets: they have the real shape, and a list of
    # exempt examples is a list a real key could be made to resemble.
    add("aws_example_key", "aws_access_key", "The docs use {s} as the access key id.", "AK" + "IA" + "IOSFODNN7EXAMPLE")
    add(
        "aws_secret_key",
        "aws_access_key",
        'aws_secret_access_key = "{s}"  # from the console',
        rand("aws-secret", B64, 40),
    )
    add(
        "azure_storage_connection",
        "azure_storage_key",
        "DefaultEndpointsProtocol=https;AccountName=loopmemdata;AccountKey={s};EndpointSuffix=core.windows.net",
        rand("azure", B64, 86) + "==",
    )
    add(
        "azure_service_bus",
        "azure_shared_access_key",
        "Endpoint=sb://loopmem.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey={s}",
        rand("servicebus", B64, 43) + "=",
    )
    add(
        "azure_sas_url",
        "azure_sas_signature",
        "Download from https://loopmem.blob.core.windows.net/exports/a.json?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2025-01-01T00:00:00Z&spr=https&sig={s} before Friday.",
        rand("sas", ALNUM, 40) + "%2B" + rand("sas2", ALNUM, 3) + "%3D",
    )
    add(
        "gcp_service_account",
        "gcp_service_account_key",
        '{{"type": "service_account", "project_id": "loopmem-prod", "private_key_id": "'
        + rand("gcp-id", HEX, 40)
        + '", "private_key": "{s}", "client_email": "svc@loopmem-prod.iam.gserviceaccount.com"}}',
        pem("PRIVATE KEY", "gcp").replace("\n", "\\n") + "\\n",
    )
    add(
        "google_api_key",
        "google_api_key",
        "Maps calls use key={s}&libraries=places.",
        "AI" + "za" + rand("g", URLSAFE, 35),
    )
    add(
        "ibm_cloud_iam",
        "ibm_cloud_iam_key",
        'ibm_cloud_api_key = "{s}"',
        rand("ibm", URLSAFE, 44),
    )
    add(
        "ibm_cos_hmac",
        "ibm_cos_hmac_secret",
        'cos_hmac_secret_access_key: "{s}"',
        rand("cos", HEX, 48),
    )
    add("cloudant", "cloudant_credentials", "cloudant_password = '{s}'", rand("cloudant", HEX, 64))
    add("softlayer", "softlayer_key", 'softlayer_api_key = "{s}"', rand("softlayer", LOWER_ALNUM, 64))

    # VCS and package registries
    add(
        "github_classic",
        "github_token",
        "Push failed until I set GH_TOKEN to {s} on the runner.",
        "gh" + "p_" + rand("ghp", ALNUM, 36),
    )
    add(
        "github_fine_grained",
        "github_token",
        "The fine-grained token {s} only has contents:read.",
        "github" + "_pat_" + rand("ghf1", ALNUM, 22) + "_" + rand("ghf2", ALNUM, 59),
    )
    add(
        "gitlab_pat",
        "gitlab_token",
        "Clone with the personal token {s} (expires in May).",
        "gl" + "pat-" + rand("gl", URLSAFE, 20),
    )
    add(
        "npm_token",
        "npm_token",
        "Add this to .npmrc:\n//registry.npmjs.org/:_authToken={s}\nthen run npm publish.",
        "np" + "m_" + rand("npm", ALNUM, 36),
    )
    add(
        "pypi_token",
        "pypi_token",
        "Upload with twine using the password {s} and username __token__.",
        "py" + "pi-AgEIcHlwaS5vcmc" + rand("pypi", URLSAFE, 80),
    )
    add(
        "artifactory",
        "artifactory_token",
        "Artifactory API key {s} is configured in settings.xml.",
        "AK" + "Cp8" + rand("jfrog", ALNUM, 69),
    )

    # Chat
    add(
        "slack_bot",
        "slack_token",
        "The bot token is {s} for the #alerts channel.",
        "xo" + "xb-" + rand("sl1", DIGITS, 12) + "-" + rand("sl2", DIGITS, 13) + "-" + rand("sl3", ALNUM, 24),
    )
    add(
        "slack_webhook",
        "slack_token",
        "Post alerts to {s} from the cron job.",
        "https://hooks.slack.com/services/T"
        + rand("wh1", UPPER + DIGITS, 8)
        + "/B"
        + rand("wh2", UPPER + DIGITS, 8)
        + "/"
        + rand("wh3", ALNUM, 24),
    )
    add(
        "discord_bot",
        "discord_bot_token",
        "Discord bot login: {s}",
        "M" + rand("dc1", ALNUM, 23) + "." + rand("dc2", URLSAFE, 6) + "." + rand("dc3", URLSAFE, 27),
    )
    add(
        "telegram_bot",
        "telegram_bot_token",
        "The Telegram bot answers with token {s} from BotFather.",
        rand("tg1", "123456789", 10) + ":AA" + rand("tg2", URLSAFE, 33),
    )

    # Payment and API providers
    add(
        "stripe_live",
        "stripe_key",
        "Charge with {s} in production only.",
        "sk" + "_live_" + rand("stripe", ALNUM, 24),
    )
    add(
        "stripe_test",
        "stripe_key",
        "Tests call Stripe with {s}.",
        "sk" + "_test_" + rand("stripe-test", ALNUM, 99),
    )
    add(
        "square_oauth",
        "square_oauth_secret",
        "Square OAuth application secret: {s}",
        "sq0" + "csp-" + rand("square", URLSAFE, 43),
    )
    add(
        "twilio_api_key",
        "twilio_key",
        "Twilio API key {s} with its secret in 1Password.",
        "SK" + rand("twilio", HEX, 32),
    )
    add(
        "sendgrid",
        "sendgrid_key",
        "SendGrid mail goes out with {s}.",
        "SG" + "." + rand("sg1", URLSAFE, 22) + "." + rand("sg2", URLSAFE, 43),
    )
    add(
        "mailchimp",
        "mailchimp_key",
        "Newsletter sync uses the Mailchimp key {s}.",
        rand("mc", HEX, 32) + "-us14",
    )
    add(
        "openai_project",
        "openai_key",
        "export OPENAI_API_KEY={s}",
        "sk" + "-proj-" + rand("oa", URLSAFE, 100),
    )
    add(
        "openai_legacy",
        "openai_key",
        "Old key {s} was revoked yesterday.",
        "sk" + "-" + rand("oal1", ALNUM, 20) + "T3Blbk" + "FJ" + rand("oal2", ALNUM, 20),
    )
    add(
        "anthropic",
        "anthropic_key",
        "Claude calls use {s} from the team account.",
        "sk" + "-ant-api03-" + rand("ant", URLSAFE, 93) + "AA",
    )
    add(
        "loopmem_key",
        "loopmem_api_key",
        "The agent authenticates with Authorization: Token {s} against loopmem.",
        "lm" + "_" + rand("lm", URLSAFE, 43),
    )

    # Tokens and keys in general
    add("jwt", "jwt", "The session cookie was {s}; it expires in 2030.", make_jwt("jwt"))
    add("jwt_in_header", "jwt", "curl -H 'Authorization: Bearer {s}' https://api.example.com/me", make_jwt("jwt2"))
    add(
        "bearer_opaque",
        "bearer_token",
        "Authorization: Bearer {s}",
        rand("bearer", ALNUM, 40),
    )
    add("rsa_private_key", "private_key", "Here is the deploy key:\n{s}\nkeep it safe.", pem("RSA PRIVATE KEY", "rsa"))
    add("openssh_private_key", "private_key", "~/.ssh/id_ed25519:\n{s}", pem("OPENSSH PRIVATE KEY", "ssh", 4))

    # Passwords
    add(
        "postgres_url",
        "url_password",
        "DATABASE_URL=postgres://loopmem_app:{s}@db.internal:5432/loopmem",
        rand("pg", ALNUM, 18),
    )
    add(
        "redis_url_no_user",
        "url_password",
        "Cache at redis://:{s}@cache.internal:6379/0 for sessions.",
        "Zt7" + "qLm2x9Pw",
    )
    add("env_password", "password", "DB_PASSWORD={s}", "Xy7#" + rand("env", ALNUM, 12))
    add("json_password", "password", '{{"username": "admin", "password": "{s}"}}', "correct-Horse-42")
    add("labelled_password", "password", "Wi-Fi for the offsite. Password: {s}", "Tr0ub4dor&3")
    add("client_secret", "secret_assignment", 'client_secret = "{s}"', rand("oauth", URLSAFE, 32))
    add("api_key_header", "secret_assignment", "x-api-key: {s}", rand("apikey", ALNUM, 32))

    # Payment cards and bank accounts
    add("visa_spaced", "payment_card", "Charge the card {s} exp 04/27.", grouped(luhn_complete("visa", "4", 16)))
    add(
        "mastercard_dashed",
        "payment_card",
        "Mastercard {s} was declined.",
        grouped(luhn_complete("mc", "2221", 16), sep="-"),
    )
    add(
        "amex",
        "payment_card",
        "Amex on file: {s}",
        (lambda n: f"{n[:4]} {n[4:10]} {n[10:]}")(luhn_complete("amex", "37", 15)),
    )
    add("discover_bare", "payment_card", "card_number={s}", luhn_complete("disc", "6011", 16))
    add(
        "iban_de_spaced",
        "iban",
        "Wire the refund to {s} (Sparkasse).",
        grouped(iban("DE", "37040044" + rand("de", DIGITS, 10))),
    )
    add("iban_gb_compact", "iban", "IBAN: {s}", iban("GB", "WEST" + rand("gb", DIGITS, 14)))
    add("iban_fr", "iban", "Virement sur {s} merci.", grouped(iban("FR", rand("fr", DIGITS, 23))))

    add("jwt_in_query", "jwt", "Magic link: https://app.example.com/login?token={s}", make_jwt("jwt3"))
    add("yaml_password", "password", 'smtp:\n  host: mail.internal\n  password: "{s}"', "S3cure!pass")
    add(
        "private_key_cut_short",
        "private_key",
        "The key pasted in the ticket was cut off:\n{s}",
        pem("EC PRIVATE KEY", "ec").rsplit("\n", 2)[0],
    )
    add("ftp_url", "url_password", "Mirror to ftp://deploy:{s}@files.example.net/pub", "k2V9-xQ7p")

    # National identifiers, only when labelled
    add("ssn_labelled", "us_ssn", "Employee record: SSN: {s}, start date 2021-03-01.", "219-09-" + "9999")
    add("ssn_words", "us_ssn", "Her social security number is {s}.", "536 22 " + "1847")
    return cases


SECRETS = secret_cases()

# Look-alikes: things with the shape of a secret that are not one. Each must produce no finding.
BENIGN: list[tuple[str, str]] = [
    ("git_sha", "Fixed in commit 3f2c9e1b7a0d4c5e8f9a1b2c3d4e5f60718293a4 on main."),
    ("short_sha", "Revert 3f2c9e1 and redeploy."),
    ("uuid", "Memory 7f3e2a1c-5b4d-4e6f-8a9b-0c1d2e3f4a5b was superseded."),
    ("uuid_upper", "Tenant ID: 9B2F4C1E-7A3D-4E5F-9C8B-1A2B3C4D5E6F"),
    (
        "data_uri",
        "Logo: data:image/png;base64,"
        + base64.b64encode(bytes(random.Random(7).randrange(256) for _ in range(180))).decode(),
    ),
    ("hex_colour", "Use #ff8800 for warnings and #1E90FF for links."),
    ("css", "color: #333; margin: 0 auto; border-radius: 4px;"),
    ("order_number", "Order #A-2024-001873 shipped; order 100045678 is pending."),
    ("version", "Upgraded Django to 5.2.19 and Python 3.11.9; client v2.14.3-rc.1+build.5."),
    ("phone_us", "Call support at +1 (415) 555-0132 or 1-800-555-0199 ext. 1234."),
    ("phone_intl", "Berlin office +49 151 23456789, London +44 20 7946 0958."),
    ("isbn", "See ISBN 978-0-13-468599-1 and ISBN-10 0-306-40615-2."),
    ("iso_timestamp", "Started 2024-05-17T10:42:13.123Z, finished 2024-05-17 10:45:01,887."),
    ("unix_timestamps", "created_at=1715942533 updated_at_ms=1715942533123"),
    ("password_policy", "The password policy requires 12 characters, one digit and one symbol."),
    ("password_reset", "Reset your password via the portal; the password: field is required."),
    ("password_label_eol", "Password:\nask the on-call engineer."),
    ("rotate_keys", "Rotate the API key every 90 days and never paste secrets into chat."),
    ("access_token_prose", "The access token expires after 3600 seconds; refresh tokens last 30 days."),
    ("env_reference", "Set password=${DB_PASSWORD} in the compose file."),
    ("code_env", 'password = os.environ["DB_PASSWORD"]'),
    ("code_annotation", "def login(username: str, password: str) -> Token:"),
    ("code_optional", "api_key: Optional[str] = None"),
    ("code_settings", "api_key = settings.OPENAI_API_KEY"),
    ("code_call", "password = make_password(raw)"),
    ("code_variable", "user.set_password(password=new_password)"),
    ("code_hash_check", "if not check_password(password, user.password_hash):"),
    ("yaml_vault", "password: !vault |"),
    ("yaml_bool", "secret: false"),
    ("placeholder_angle", "token: <redacted>, api_key: <your-key-here>"),
    ("placeholder_elided", "export OPENAI_API_KEY=sk-..."),
    ("placeholder_mask", 'password: "********"'),
    ("placeholder_your", "API_KEY=your_api_key_here"),
    ("ttl_setting", "password_reset_token_ttl = 3600"),
    ("sklearn_like", "Wrap it with sk-learn-compatible-estimator-wrapper-v2 first."),
    ("lm_prefix_prose", "Loopmem keys start with lm_ and the UI shows only lm_Ab3dE9f…"),
    ("akia_prose", "AKIA prefixes mark long-term keys, ASIA temporary ones."),
    ("aiza_prose", "Google keys begin with AIza and are 39 characters long."),
    ("ghp_prose", "Classic tokens start with ghp_ and fine-grained ones with github_pat_."),
    ("ghp_inside_words", "Publish with ghpages or ghp-import, then check ghp_status in the logs."),
    ("bearer_prose", "Bearer tokens are issued by the auth service."),
    ("card_bad_luhn", "Test with 4111 1111 1111 1112, which fails the checksum."),
    ("card_no_issuer", "Tracking number 1234 5678 9012 3456 7 arrives Monday."),
    ("card_last4", "Paid with the card ending in 4242."),
    ("iban_bad_check", "Account DE00 3704 0044 0532 0130 00 is a typo."),
    ("ssn_unlabelled", "Part number 219-09-9999 is out of stock."),
    ("ssn_prose", "The SSN field is optional for contractors."),
    ("ip_addresses", "Listen on 10.0.0.12:8080 and [2001:db8::1]:443."),
    ("mac_address", "NIC 00:1A:2B:3C:4D:5E went down."),
    ("url_user_only", "Clone https://deploy@git.example.com/loopmem.git or https://example.com:8443/api?x=1."),
    ("email", "Mail alice@example.com or ops+alerts@example.org."),
    ("sha256_digest", "python:3.11-slim@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("base64_short", "The header X-Debug: SGVsbG8gd29ybGQ= is harmless."),
    ("jwt_like_no_alg", "Cursor eyJvZmZzZXQiOjUwfQ.eyJwYWdlIjoyfQ.c2ln is not a token."),
    ("pagination_cursor", "GET /memories?cursor=eyJvZmZzZXQiOjUwLCJpZCI6NDJ9"),
    ("stripe_publishable", "The publishable key pk_live_" + "51HxYzAbCdEfGhIjKlMnOpQr is public by design."),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word."),
    ("kubectl", "kubectl -n loopmem rollout restart deployment/loopmem-web"),
    ("log_line", "2024-05-17 10:42:13,123 INFO request_id=7f3e2a1c latency_ms=123 status=200 path=/api/recall"),
    ("markdown_table", "| 2024 | 1,234,567 | 89.5% | 0.0042 |"),
    ("slack_ids", "Channel C024BE91L, user U0G9QF9C6; hugs and xoxo from the team."),
    ("gha_secret_ref", "password: ${{ secrets.DB_PASSWORD }}"),
    ("erb_secret_ref", "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>"),
    ("js_env", "const apiKey = process.env.API_KEY;"),
    ("django_env", 'SECRET_KEY = env("DJANGO_SECRET_KEY")'),
    ("k8s_secret_ref", "valueFrom:\n  secretKeyRef:\n    name: db\n    key: password"),
    ("markdown_label", "**Password:** use SSO, never a shared login."),
    ("wallet_address", "Send gas to 0x52908400098527886E0F7030069857D2E4169EE7 on testnet."),
    ("npm_integrity", '"integrity": "sha512-' + base64.b64encode(bytes(range(64))).decode() + '"'),
    ("hex_id_32", "trace_id=9b2f4c1e7a3d4e5f9c8b1a2b3c4d5e6f span_id=00f067aa0ba902b7"),
    ("docs_dsn_placeholder", "Point it at postgres://user:password@localhost:5432/app while developing."),
    ("localhost_then_email", "Open http://localhost:8000 and mail bob@example.com."),
    ("ssh_clone", "git clone ssh://git@github.com:22/acme/loopmem.git"),
    ("npmrc_placeholders", "Put //registry.npmjs.org/:_authToken=<token> or :_authToken=${NPM_TOKEN} in .npmrc"),
    ("form_labels", "Username: bob Password: Email: bob@example.com Phone: +1 415 555 0132"),
    ("part_numbers", "Reorder parts APB12345678 and APEX2024RELEASE before the AKC100200300 audit."),
]

# A secret next to text whose lowercase is longer (the dotted capital I): the keyword paths fall back to
# searching the whole text, and offsets stay right.
NON_ASCII = Secret("non_ascii_text", "password", "İstanbul ofisi: password=Kp9#vQ2mZx", "Kp9#vQ2mZx")


def covers(findings: list[Finding], case: Secret) -> bool:
    """A finding spans the whole secret. Its kind is the detector's to name: a maintained rule may report the
    secret as part of a wider one (an Azure key inside its connection string) under its own name."""
    start = case.text.index(case.secret)
    end = start + len(case.secret)
    return any(f.start <= start and f.end >= end for f in findings)


# --- What the write-path tests share -------------------------------------------------------------------------

# Every secret of the corpus, the non-ASCII one included: each write path must refuse all of them.
WRITE_SECRETS = [*SECRETS, NON_ASCII]
SECRET_DETECTED_MESSAGE = (
    "The request holds what looks like a secret (a credential, key, token or card number); nothing was stored. "
    "Store a pointer to where the secret is kept (a vault path, an environment variable name) instead."
)


def secret_span(case: Secret) -> tuple[int, int]:
    start = case.text.index(case.secret)
    return start, start + len(case.secret)


def refused_over_its_span(details: dict[str, Any], name: str, case: Secret, offset: int = 0) -> bool:
    """A refusal names a span of field `name` covering the secret (`offset`: where the case's text starts in that
    field's value); the kind is the detector's to name (`covers`)."""
    start, end = secret_span(case)
    spans = details.get("spans", {}).get(name, [])
    return bool(details.get("kinds")) and any(s <= start + offset and e >= end + offset for s, e in spans)


@dataclass
class PathFigures:
    """One write path's result over the whole corpus: which secrets got through, which look-alikes were refused."""

    path: str
    false_negatives: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)

    def report(self) -> str:
        kinds = len({c.kind for c in WRITE_SECRETS})
        return (
            f"secret corpus on {self.path}: {len(WRITE_SECRETS)} secrets of {kinds} kinds, {len(BENIGN)} look-alikes; "
            f"false negatives {len(self.false_negatives)} {self.false_negatives}, "
            f"false positives {len(self.false_positives)} {self.false_positives}"
        )

    def check(self) -> None:
        print(self.report())  # noqa: T201 - the figures are the point; docs/security.md quotes them.
        assert self.false_negatives == []
        assert len(self.false_positives) <= 2
