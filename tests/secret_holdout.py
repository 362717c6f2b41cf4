"""Blind held-out evaluation set for the secret detector.

Written independently of the detector's rules and of the other corpora, from
providers' documented token formats and from how people tell secrets to an
assistant in chat.  Standard library only.

``holdout_secrets()`` returns ``(id, kind, text, secret_substring)`` tuples;
``holdout_look_alikes()`` returns ``(id, text)`` tuples that contain no secret.
All random values are generated at call time from ``SEED`` (taken from
``LOOPMEM_SECRET_HOLDOUT_SEED`` when set, otherwise random per process), so a
failure can be reproduced by exporting the printed seed.  Well-known token
prefixes are joined at run time so this file holds no whole token.
"""

from __future__ import annotations

import base64
import json
import os
import random
import string

_SEED_ENV = "LOOPMEM_SECRET_HOLDOUT_SEED"
SEED: int = int(os.environ[_SEED_ENV]) if os.environ.get(_SEED_ENV) else random.SystemRandom().randrange(2**32)

DIGITS = string.digits
HEX = "0123456789abcdef"
HEX_UP = HEX.upper()
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
BASE32_LOWER = "abcdefghijklmnopqrstuvwxyz234567"

_WORDS = [
    "Kestrel",
    "Marmot",
    "Lantern",
    "Cobalt",
    "Juniper",
    "Pelican",
    "Saffron",
    "Quartz",
    "Tundra",
    "Walnut",
    "Orchid",
    "Falcon",
    "Biscuit",
    "Harbour",
    "Meadow",
    "Pistachio",
]
_SEED_WORDS = [
    "apple",
    "anchor",
    "bridge",
    "cactus",
    "canyon",
    "desert",
    "dolphin",
    "eagle",
    "engine",
    "fabric",
    "forest",
    "galaxy",
    "garden",
    "hammer",
    "harbor",
    "island",
    "ivory",
    "jacket",
    "jungle",
    "kidney",
    "kitten",
    "ladder",
    "lemon",
    "magnet",
    "marble",
    "napkin",
    "noble",
    "orange",
    "oxygen",
    "panda",
    "pepper",
    "rabbit",
    "rocket",
    "saddle",
    "silver",
    "tackle",
    "ticket",
    "umbrella",
    "uncle",
    "valley",
    "velvet",
    "wagon",
    "walnut",
    "yellow",
    "zebra",
]


def _j(*parts: str) -> str:
    """Join prefix fragments at run time (keeps whole tokens out of the source)."""
    return "".join(parts)


def _r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _uuid(rng: random.Random) -> str:
    variant = rng.choice("89ab")
    return f"{_r(rng, 8, HEX)}-{_r(rng, 4, HEX)}-4{_r(rng, 3, HEX)}-{variant}{_r(rng, 3, HEX)}-{_r(rng, 12, HEX)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _luhn_ok(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return len(digits) >= 12 and total % 10 == 0


def _card(rng: random.Random, prefix: str, length: int) -> str:
    body = prefix + _r(rng, length - len(prefix) - 1, DIGITS)
    for check in DIGITS:
        if _luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


def _group(number: str, sizes: tuple[int, ...], sep: str = " ") -> str:
    out, i = [], 0
    for size in sizes:
        out.append(number[i : i + size])
        i += size
    return sep.join(out)


def _iban_ok(iban: str) -> bool:
    s = iban.replace(" ", "")
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _password(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}{rng.choice('!#%&*?@+')}{_r(rng, 2, DIGITS)}{_r(rng, 4, ALNUM)}"


def _num(rng: random.Random, n: int) -> str:
    first = rng.choice("123456789")
    return first + _r(rng, n - 1, DIGITS)


def holdout_secrets(seed: int | None = None) -> list[tuple[str, str, str, str]]:
    rng = random.Random(SEED if seed is None else seed)
    out: list[tuple[str, str, str, str]] = []

    def add(kind: str, text: str, secret: str) -> None:
        out.append((f"hs{len(out) + 1:02d}", kind, text, secret))

    # ---- less common providers with documented prefixes / shapes -------------------------
    tok = _j("ATA", "TT") + "3xFfGF0" + _r(rng, 170, B64URL) + "=" + _r(rng, 8, HEX_UP)
    add("atlassian_api_token", f"btw the Jira API token for the release bot is {tok} (owner: ops@acme.io)", tok)

    tok = _j("CFP", "AT-") + _r(rng, 43, B64URL)
    add(
        "contentful_pat",
        f"CONTENTFUL_SPACE_ID={_r(rng, 12, LOWER_ALNUM)}\nCONTENTFUL_MANAGEMENT_TOKEN={tok}",
        tok,
    )

    tok = _j("tf", "p_") + _r(rng, 44, ALNUM) + "_" + _r(rng, 14, ALNUM)
    add("typeform_pat", f"typeform:\n  personal_token: {tok}\n  workspace: marketing", tok)

    tok = _b64(f"tok:{_uuid(rng).replace('-', '_')}:1:0".encode())
    add("intercom_access_token", f"Intercom access token for the support sync: {tok}", tok)

    tok = _r(rng, 40, ALNUM)
    add(
        "zendesk_api_token",
        f"curl https://acme.zendesk.com/api/v2/tickets.json -u jane@acme.io/token:{tok}",
        tok,
    )

    tok = f"1/{rng.randint(1200000000000000, 1209999999999999)}:{_r(rng, 32, HEX)}"
    add("asana_pat", json.dumps({"asana_pat": tok, "project": "Q3 roadmap"}), tok)

    tok = _j("p", "k_") + str(rng.randint(10_000_000, 99_999_999)) + "_" + _r(rng, 32, UPPER_ALNUM)
    add("clickup_api_token", f"ClickUp API token: `{tok}` - paste it into the n8n node", tok)

    tok = _j("fio", "-u-") + _r(rng, 64, B64URL)
    add("frameio_token", f"docker run -d -e FRAMEIO_TOKEN={tok} -p 8080:8080 acme/review-sync:1.4", tok)

    tok = _j("FLW", "SECK-") + _r(rng, 32, HEX) + "-X"
    add(
        "flutterwave_secret_key",
        f"la clé secrète Flutterwave de prod c'est {tok}, ne la mets surtout pas dans le front",
        tok,
    )

    tok = _j("sk_", "live_") + _r(rng, 40, HEX)
    add(
        "paystack_secret_key",
        f"apiVersion: v1\nkind: Secret\nstringData: {{PAYSTACK_SECRET_KEY: {tok}}}",
        tok,
    )

    kid = _j("rzp_", "live_") + _r(rng, 14, ALNUM)
    tok = _r(rng, 24, ALNUM)
    add("razorpay_key_secret", f"RAZORPAY_KEY_ID={kid}\nRAZORPAY_KEY_SECRET={tok}", tok)

    tok = _b64(rng.randbytes(64))
    add(
        "kraken_private_key",
        f"la clave privada de la API de Kraken es {tok} y la pública te la mandé por correo",
        tok,
    )

    pub, tok = _r(rng, 32, HEX), _r(rng, 32, HEX)
    add(
        "mailjet_secret_key",
        f"  512  export MJ_APIKEY_PUBLIC={pub}\n  513  export MJ_APIKEY_PRIVATE={tok}",
        tok,
    )

    tok = _j("xkey", "sib-") + _r(rng, 64, HEX) + "-" + _r(rng, 16, ALNUM)
    add("brevo_api_key", f"a chave da API do Brevo (antigo Sendinblue) é {tok}, guarda aí", tok)

    tok = _r(rng, 64, ALNUM) + "_" + _r(rng, 4, ALNUM) + "_" + _uuid(rng)
    add("webex_bot_token", f"Der Token für unseren Webex-Bot lautet {tok} - bitte nicht weitergeben.", tok)

    tok = _j("dt0", "c01.") + _r(rng, 24, UPPER_ALNUM) + "." + _r(rng, 64, UPPER_ALNUM)
    add(
        "dynatrace_api_token",
        f'dynatrace:\n  url: https://{_r(rng, 8, LOWER_ALNUM)}.live.dynatrace.com\n  apiToken: "{tok}"',
        tok,
    )

    tok = "pat." + _r(rng, 22, B64URL) + "." + _r(rng, 24, HEX) + "." + _r(rng, 20, ALNUM)
    add("harness_pat", f"Harness PAT (expires in 30d): {tok}", tok)

    tok = _j("sq", "u_") + _r(rng, 40, HEX)
    add(
        "sonarqube_token",
        f"$ mvn -B verify sonar:sonar -Dsonar.host.url=https://sonar.acme.io -Dsonar.token={tok}",
        tok,
    )

    tok = _j("api", "-") + _uuid(rng)
    add("launchdarkly_access_token", json.dumps({"launchdarkly": {"accessToken": tok, "project": "web"}}), tok)

    tok = _j("rdm", "e_") + _r(rng, 70, LOWER_ALNUM)
    add("readme_api_key", f"rdme openapi ./openapi.yaml --key={tok} --id=64f1c0a2", tok)

    tok = _j("pn", "u_") + _r(rng, 36, ALNUM)
    add("prefect_api_key", f"prefect cloud login -k {tok} --workspace acme/prod", tok)

    tok = _j("tskey", "-auth-") + _r(rng, 12, ALNUM) + "CNTRL-" + _r(rng, 33, ALNUM)
    add("tailscale_auth_key", f"sudo tailscale up --authkey={tok} --advertise-tags=tag:ci", tok)

    tok = "2" + _r(rng, 26, ALNUM) + "_" + _r(rng, 21, ALNUM)
    add("ngrok_authtoken", f"ngrok config add-authtoken {tok}", tok)

    tok = _j("ic", "o-") + _r(rng, 32, ALNUM)
    add("infracost_api_key", f"INFRACOST_API_KEY='{tok}'", tok)

    tok = _b64(rng.randbytes(32))
    host = f"akab-{_r(rng, 16, LOWER_ALNUM)}-{_r(rng, 16, LOWER_ALNUM)}.luna.akamaiapis.net"
    add("akamai_client_secret", f"[default]\nhost = {host}\nclient_secret = {tok}", tok)

    tok = _j("pcs", "k_") + _r(rng, 5, ALNUM) + "_" + _r(rng, 64, ALNUM)
    add("pinecone_api_key", f'pc = Pinecone(api_key="{tok}")', tok)

    tok = _j("dp.", "pt.") + _r(rng, 43, ALNUM)
    add("doppler_token", f"doppler configure set token {tok} --scope /", tok)

    tok = _j("lin_", "api_") + _r(rng, 40, ALNUM)
    add("linear_api_key", f"la chiave API di Linear per lo script è {tok}, scade a fine mese", tok)

    tok = "pat" + _r(rng, 14, ALNUM) + "." + _r(rng, 64, HEX)
    add("airtable_pat", f"Airtable token is `{tok}` (scopes: data.records:read)", tok)

    header = _b64u(json.dumps({"alg": "EdDSA", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64u(
        json.dumps(
            {"a": "rw", "iat": rng.randint(1_700_000_000, 1_760_000_000), "id": _uuid(rng)}, separators=(",", ":")
        ).encode()
    )
    tok = f"{header}.{payload}.{_r(rng, 86, B64URL)}"
    add(
        "turso_auth_token",
        f'createClient({{ url: "libsql://notes-acme.turso.io",\n  authToken: "{tok}" }})',
        tok,
    )

    tok = _j("np", "g_") + _r(rng, 12, ALNUM)
    add(
        "neon_db_password",
        f"DATABASE_URL=postgresql://neondb_owner:{tok}@ep-quiet-pond-a{_r(rng, 7, LOWER_ALNUM)}"
        ".eu-central-1.aws.neon.tech/neondb?sslmode=require",
        tok,
    )

    tok = f"{rng.randint(10**8, 10**10 - 1)}:AA{_r(rng, 33, B64URL)}"
    add("telegram_bot_token", f"el token del bot es {tok}, lo saqué de BotFather", tok)

    tok = _j("NR", "AK-") + _r(rng, 27, UPPER_ALNUM)
    add("newrelic_user_key", f"env:\n  NEW_RELIC_API_KEY: {tok}", tok)

    tok = _j("AGE-SECRET", "-KEY-1") + _r(rng, 58, BECH32.upper())
    add(
        "age_secret_key",
        f"# created: 2024-05-01T10:12:00Z\n# public key: age1{_r(rng, 58, BECH32)}\n{tok}",
        tok,
    )

    # ---- the obvious providers, in awkward wrappings ---------------------------------------
    tok = _j("gh", "p_") + _r(rng, 36, ALNUM)
    wrapped = tok[:22] + "\n" + tok[22:]
    add("github_pat_line_wrapped", f"here's the PAT, my terminal wrapped it:\n{wrapped}", wrapped)

    tok = _r(rng, 40, ALNUM + "+/")
    add(
        "aws_secret_access_key",
        f"  88  aws configure set aws_access_key_id {_j('AK', 'IA')}{_r(rng, 16, UPPER_ALNUM)}\n"
        f"  89  aws configure set aws_secret_access_key {tok}",
        tok,
    )

    tok = _j("sk_", "live_") + "51" + _r(rng, 97, ALNUM)
    add("stripe_secret_key", f"use `{tok}` for the prod webhook replay, then delete this message", tok)

    tok = _j("sk-", "proj-") + _r(rng, 74, B64URL) + "T3BlbkFJ" + _r(rng, 74, B64URL)
    add("openai_api_key", f'"openai": {{"api_key": "{tok}"}}', tok)

    # ---- personal secrets told in conversation --------------------------------------------
    pw = _password(rng)
    add("password", f"btw the staging db password is {pw}", pw)

    pw = _password(rng)
    add("password", f"remember my bank login: user jdoe{rng.randint(10, 99)} pass {pw}", pw)

    code = _num(rng, 6)
    add("alarm_code", f"our alarm code is {code}, disarm it right when you get in", code)

    pw = _password(rng)
    add("wifi_password", f"the guest wifi password at the cabin is {pw}", pw)

    num = _group(_card(rng, rng.choice(["34", "37"]), 15), (4, 6, 5))
    add("card_number", f"my Amex is {num}, exp 04/28", num)

    phrase = " ".join(rng.sample(_SEED_WORDS, 12))
    add("seed_phrase", f"my MetaMask recovery phrase, keep it safe: {phrase}", phrase)

    code = f"{_num(rng, 4)} {_r(rng, 4, DIGITS)}"
    add("backup_code", f"one of my Google backup codes is {code}", code)

    code = "-".join(_r(rng, 4, "123456789"))
    add("door_code", f"the lockbox at the back door opens with {code}", code)

    num = _card(rng, "4", 16)
    add("card_number", f"meine Kreditkarte {num} läuft 09/27 ab", num)

    pw = _password(rng)
    add("wifi_password", f"Das WLAN-Passwort zuhause ist {pw}", pw)

    pin = _num(rng, 4)
    add("pin", f"Meine EC-Karten-PIN ist {pin}, falls ich sie wieder vergesse", pin)

    pw = _password(rng)
    add("password", f"Zugang zum Router: admin / {pw}", pw)

    tok = _r(rng, 32, ALNUM)
    add("generic_api_key", f"la clé API de prod c'est {tok}", tok)

    pw = _password(rng)
    add("password", f"le mot de passe du compte Free c'est « {pw} » et l'identifiant c'est mon mail", pw)

    code = f"{rng.randint(1, 9)}{rng.choice('ABCD')}{_r(rng, 2, DIGITS)}"
    add("door_code", f"le digicode de l'immeuble : {code}", code)

    pw = _password(rng)
    add("password", f"mi contraseña del correo es {pw}, no se la digas a nadie", pw)

    num = _group(_card(rng, str(rng.randint(51, 55)), 16), (4, 4, 4, 4))
    add("card_number", f"la tarjeta {num} caduca 11/26", num)

    pw = _password(rng)
    add("password", f"la password del NAS è '{pw}'", pw)

    # ---- unusual spacing / line breaks ------------------------------------------------------
    num = _group(_card(rng, "4", 16), (4, 4, 4, 4), "-")
    add("card_number", f"card: {num}   exp 01/29", num)

    pw = _password(rng)
    add("password", f"here's the root password for the VPS:\n\n    {pw}", pw)

    pin = " ".join(_r(rng, 5, "123456789"))
    add("pin", f"the gate PIN is {pin} then #", pin)

    phrase = " ".join(w.lower() for w in rng.sample(_WORDS, 4))
    add("passphrase", f"the passphrase for my ssh key is {phrase}", phrase)

    return out


def holdout_look_alikes(seed: int | None = None) -> list[tuple[str, str]]:
    rng = random.Random((SEED if seed is None else seed) ^ 0x5EED)
    out: list[tuple[str, str]] = []

    def add(text: str) -> None:
        out.append((f"hl{len(out) + 1:02d}", text))

    # ---- talk about secrets, no secret -----------------------------------------------------
    add("the API key goes in the X-Api-Key header, not in the query string")
    add("my password manager generated a 20-character password for the new bank account")
    add("the token expired at 10:42, so the nightly sync failed")
    add("remind me to rotate the staging DB password before Friday")
    add("our alarm code has six digits; Maria knows it, don't store it here")
    add("the wifi network is called FRITZ!Box 7590 KQ, the password is on the sticker under the router")
    add("I reset my PIN at the branch today, the new one comes by mail")
    add("use a fine-grained personal access token with read-only scope for the CI job")
    add("mein PIN-Brief kam heute an")
    add("Das Passwort muss mindestens 12 Zeichen lang sein und eine Ziffer enthalten.")
    add("Die Tür-PIN wurde geändert, die neue schicke ich dir per Signal.")
    add("le mot de passe doit contenir 12 caractères")
    add("j'ai réinitialisé mon mot de passe hier soir, tout marche")
    add("la clé API de prod est dans le coffre Vault, pas dans le dépôt")
    add("la contraseña debe tener al menos una mayúscula y un número")
    add("el token del bot caducó, hay que pedir otro a BotFather")
    add("la password del wifi è scritta sotto il router")
    add("a senha nova chega por SMS em alguns minutos")

    # ---- public identifiers that look random ----------------------------------------------
    add(f"fixed in commit {_r(rng, 40, HEX)}, cherry-pick it onto release/2.3")
    add(f"order {_uuid(rng)} was refunded yesterday")
    add(f"x-amz-request-id: {_r(rng, 16, HEX_UP)}\nx-amz-id-2: {_b64(rng.randbytes(57))}")
    add(f"s3://acme-exports/2024/05/17/{_uuid(rng)}/part-00000-{_r(rng, 8, HEX)}.snappy.parquet")
    add(f"watch this: https://www.youtube.com/watch?v={_r(rng, 11, B64URL)}")
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
    add(f'<img alt="thumb" src="data:image/png;base64,{_b64(png + rng.randbytes(48))}">')
    add(f'"integrity": "sha512-{_b64(rng.randbytes(64))}"')
    add(f"image: nginx@sha256:{_r(rng, 64, HEX)}")
    fpr = _r(rng, 40, HEX_UP)
    add(f"my PGP fingerprint is {_group(fpr, (4,) * 5)}  {_group(fpr[20:], (4,) * 5)}")
    key = _b64(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + rng.randbytes(32))
    add(f"add this to authorized_keys: ssh-ed25519 {key} jane@laptop")
    add(f"my car's plate is M-{_r(rng, 2, string.ascii_uppercase)} {rng.randint(100, 9999)}")
    add(f"UPS tracking: 1Z{_r(rng, 6, UPPER_ALNUM)}{_r(rng, 10, DIGITS)}")
    bad = _card(rng, "6", 16)
    bad = bad[:-1] + str((int(bad[-1]) + rng.randint(1, 9)) % 10)
    add(f"Payback-Kundennummer {_group(bad, (4, 4, 4, 4))}")
    bban = _r(rng, 18, DIGITS)
    wrong = next(f"DE{c:02d}{bban}" for c in rng.sample(range(2, 99), 97) if not _iban_ok(f"DE{c:02d}{bban}"))
    add(f"überweis es auf {_group(wrong, (4, 4, 4, 4, 4, 2))}, Verwendungszweck Miete")
    add(f"const stripe = Stripe('{_j('pk_', 'live_')}51{_r(rng, 97, ALNUM)}');")
    mapbox = _b64u(json.dumps({"u": "acme", "a": _r(rng, 25, LOWER_ALNUM)}, separators=(",", ":")).encode())
    add(f"mapboxgl.accessToken = 'pk.{mapbox}.{_r(rng, 22, B64URL)}';")
    add(f'<div class="g-recaptcha" data-sitekey="6L{_r(rng, 6, ALNUM)}AAAAA{_r(rng, 27, B64URL)}"></div>')
    add(f"version https://git-lfs.github.com/spec/v1\noid sha256:{_r(rng, 64, HEX)}\nsize {rng.randint(10**4, 10**8)}")
    add(f"db.users.find({{_id: ObjectId('{_r(rng, 24, HEX)}')}})")
    add(f"send the refund to 0x{_r(rng, 40, HEX)} on mainnet")
    add(f"the payout txid is {_r(rng, 64, HEX)}")
    add(f"see https://acme.slack.com/archives/C0{_r(rng, 9, UPPER_ALNUM)}/p{_r(rng, 16, DIGITS)}")
    add(f"customer cus_{_r(rng, 14, ALNUM)} disputed the charge ch_{_r(rng, 24, ALNUM)}")
    add(f"job 01H{_r(rng, 23, CROCKFORD)} finished in 42s")
    add(f"pod api-{_r(rng, 9, LOWER_ALNUM)}-{_r(rng, 5, LOWER_ALNUM)} is crashlooping, container {_r(rng, 12, HEX)}")
    add(f"pinned to ipfs://bafybei{_r(rng, 52, BASE32_LOWER)}")
    add(f"Sentry event {_r(rng, 32, HEX)} has the full stack trace")

    # ---- code that references secrets without containing them ------------------------------
    add('api_key = os.environ["STRIPE_SECRET_KEY"]')
    add('password = getpass.getpass("DB password: ")')
    add("- run: npm publish\n  env:\n    NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}")
    add("DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app")
    add("export GITHUB_TOKEN=$(gh auth token)")
    add('kubectl create secret generic api-creds --from-literal=key="$API_KEY"')
    add('headers = {"Authorization": f"Bearer {token}"}')
    add('secret = vault.read("secret/data/prod/db")["data"]["password"]')

    # ---- placeholders and documented examples ----------------------------------------------
    add('curl -H "X-Api-Key: <API_KEY>" https://api.example.com/v1/items')
    add(f"OPENAI_API_KEY={_j('sk', '-')}...")
    add("license key format: xxxx-xxxx-xxxx-xxxx")
    add(
        f"aws_access_key_id = {_j('AK', 'IA', 'IOSFODNN7', 'EXAMPLE')}\n"
        f"aws_secret_access_key = {_j('wJalrXUtnFEMI/K7MDENG/bPxRfiCY', 'EXAMPLEKEY')}"
    )
    add(f"GITHUB_TOKEN={_j('gh', 'p_')}{'x' * 36}")
    add('api_key: YOUR_API_KEY_HERE\npassword: "********"')
    add("password: {{ .Values.database.password | quote }}")
    return out


def _self_check() -> None:
    secrets = holdout_secrets()
    looks = holdout_look_alikes()
    assert len(secrets) == 60, len(secrets)
    assert len(looks) == 60, len(looks)
    ids = [s[0] for s in secrets] + [lk[0] for lk in looks]
    assert len(ids) == len(set(ids))
    for sid, kind, text, secret in secrets:
        assert secret, sid
        assert text.count(secret) == 1, (sid, kind, text, secret)
        if kind == "card_number":
            assert _luhn_ok(secret), (sid, secret)
    # the Luhn-invalid and IBAN look-alikes really are invalid
    by_text = {t for _, t in looks}
    payback = next(t for t in by_text if t.startswith("Payback"))
    assert not _luhn_ok(payback), payback
    iban = next(t for t in by_text if t.startswith("überweis"))
    iban_value = iban.split("auf ", 1)[1].split(",", 1)[0]
    assert len(iban_value.replace(" ", "")) == 22, iban
    assert not _iban_ok(iban_value), iban
    # reproducible for a given seed
    assert holdout_secrets() == secrets
    assert holdout_look_alikes() == looks
