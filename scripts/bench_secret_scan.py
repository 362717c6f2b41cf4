"""Times `loopmem.secret_guard.scan.scan` on 100 KB texts: prose, code and logs, each without and with secrets.

Prints one JSON object: ms per KB (p50/p95 over the repetitions) for each text, and the load average before
and after, since on the 2-core machines a busy neighbour moves the figure. Run it on a quiet machine:

    /work/main/.venv/bin/python scripts/bench_secret_scan.py [--repetitions 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import string
import sys
import time
from collections.abc import Callable, Sized
from pathlib import Path

SIZE = 100 * 1024
ALNUM = string.ascii_letters + string.digits

PROSE = (
    "the agent stored a note about deployment and rollback while the team reviewed the incident report "
    "memory recall returns the most relevant items for a query so prompts stay short we rotated the api key "
    "after the audit and the password policy now requires twelve characters users asked for export to json "
    "tokens expire after one hour the database migration finished at noon and latency dropped below forty "
    "milliseconds configuration lives in environment variables never in the repository"
)


def _fill(piece: Callable[[], str]) -> str:
    """Pieces from `piece` joined until the text reaches SIZE characters."""
    pieces: list[str] = []
    size = 0
    while size < SIZE:
        pieces.append(piece())
        size += len(pieces[-1])
    return "".join(pieces)


def prose(rng: random.Random) -> str:
    vocabulary = PROSE.split()

    def sentence() -> str:
        words = [rng.choice(vocabulary) for _ in range(rng.randint(8, 22))]
        return " ".join(words).capitalize() + rng.choice((". ", ". ", "? ", ".\n\n"))

    return _fill(sentence)


CODE_LINES = (
    "def handle_{n}(request, password_input: str) -> dict[str, object]:\n",
    "    user = settings.DB_USER  # see ticket #{d}\n",
    "    digest = hashlib.sha256(payload).hexdigest()[:{d2}]\n",
    "    return {{'id': '{uuid}', 'color': '#{hex6}', 'amount': {d}.50}}\n",
    "    if not check_password(password, user.password_hash):\n",
    "        raise PermissionDenied('bad credentials for {n}')\n",
    "    api_key = settings.OPENAI_API_KEY\n",
    "    logger.info('recall took %s ms', elapsed_{n})\n",
    "\n",
)


def code(rng: random.Random) -> str:
    return _fill(
        lambda: rng.choice(CODE_LINES).format(
            n=rng.randint(1, 999),
            d=rng.randint(1, 99999),
            d2=rng.randint(8, 64),
            uuid=_uuid(rng),
            hex6=_hex(rng, 6),
        )
    )


def logs(rng: random.Random) -> str:
    return _fill(
        lambda: (
            f"2024-05-17 10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d},{rng.randint(0, 999):03d} "
            f"{rng.choice(('INFO', 'INFO', 'WARNING', 'ERROR'))} request_id={_uuid(rng)} "
            f"ip=10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)} path=/api/{rng.choice(('recall', 'memories'))} "
            f"status={rng.choice((200, 201, 404, 422))} latency_ms={rng.randint(1, 900)} commit={_hex(rng, 40)}\n"
        )
    )


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _secrets(rng: random.Random) -> list[str]:
    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    # Prefixes joined at run time, as in the corpus test, so the file holds no whole token.
    return [
        "AK" + "IA" + r(16, string.ascii_uppercase + string.digits),
        "gh" + "p_" + r(36),
        "sk" + "-proj-" + r(64),
        "postgres://app:" + r(16) + "@db.internal:5432/app",
        "DB_PASSWORD=" + r(14) + "#1",
        "lm" + "_" + r(43, ALNUM + "-_"),
        "xo" + "xb-" + r(12, string.digits) + "-" + r(24),
    ]


def with_secrets(text: str, rng: random.Random) -> str:
    """`text` with a secret put in at a line break about every 2 KB (its size grows a little)."""
    secrets = _secrets(rng)
    out = []
    for i, chunk in enumerate(text.split("\n")):
        out.append(chunk)
        if i % 25 == 0:
            out.append(f"note: {rng.choice(secrets)} was pasted here")
    return "\n".join(out)


# Crafted texts: a prefix repeated without ever completing a secret, the shape that makes a backtracking
# regex rescan the rest of the text from every occurrence. The figure must stay near the others.
ADVERSARIAL_PREFIXES = (
    *("eyJ", "//", "sk-", "xoxb-1-", "ghp_", "-----BEGIN RSA PRIVATE KEY-----", "password: "),
    # The structural and prose forms' own worst cases: a name whose value runs on, a noun with no value.
    *("key=", "pw ", "authorization: "),
    # Words: a run of BIP39 words of no seed's length, passphrase openings, "heroku" with no key after it.
    *("abandon ability ", "the passphrase is tundra ", "heroku "),
)


def adversarial(prefix: str) -> str:
    # The keywords at the end put the long line before the keyword-led plugins too.
    return prefix * (SIZE // len(prefix)) + " key token password aws ://u:p@ _authToken= T3BlbkFJ"


def measure(scan: Callable[[str], Sized], text: str, repetitions: int) -> dict[str, float]:
    scan(text)  # warm-up: regex caches and the detect-secrets imports
    per_kb = []
    for _ in range(repetitions):
        started = time.perf_counter()
        scan(text)
        per_kb.append((time.perf_counter() - started) * 1000 / (len(text) / 1024))
    per_kb.sort()
    return {
        "kb": round(len(text) / 1024, 1),
        "p50_ms_per_kb": round(statistics.median(per_kb), 4),
        "p95_ms_per_kb": round(per_kb[min(len(per_kb) - 1, int(len(per_kb) * 0.95))], 4),
        "findings": len(scan(text)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=30)
    args = parser.parse_args()

    # Run as a file, this script's folder is on sys.path, not the project's.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    # The detector reads one setting (the data dir, where the maintained rules are compiled once); placeholder URLs
    # keep the settings from starting the embedded PostgreSQL and Redis, which the bench never uses.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    os.environ.setdefault("DATABASE_URL", "postgres://bench/unused")
    os.environ.setdefault("REDIS_URL", "redis://bench:1/0")
    import django

    django.setup()
    from loopmem.secret_guard.scan import scan

    rng = random.Random(18)
    texts = {"prose": prose(rng), "code": code(rng), "logs": logs(rng)}
    for name in list(texts):
        texts[f"{name}+secrets"] = with_secrets(texts[name], rng)
    for prefix in ADVERSARIAL_PREFIXES:
        texts[f"adversarial {prefix!r}"] = adversarial(prefix)

    load_before = os.getloadavg()
    results = {name: measure(scan, text, args.repetitions) for name, text in texts.items()}
    report = {
        "repetitions": args.repetitions,
        "texts": results,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))  # noqa: T201 - the report is this script's output


if __name__ == "__main__":
    main()
