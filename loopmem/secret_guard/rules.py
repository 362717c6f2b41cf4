"""The maintained rule set of provider token formats: Kingfisher's built-in rules, run in-process.

Kingfisher (MongoDB, Apache-2.0; the `kingfisher-secret-scanner` wheel, pinned in requirements/base.txt) carries
the Betterleaks rules (a maintained successor of gitleaks' provider list) and Google Veles' detectors: about 440
formats, each a regex with its keywords, entropy floor and token filters, compiled into one Vectorscan database
that scans in linear time. A provider that starts issuing a new token format is covered by the next release of
that list, not by a pattern someone here remembers to add: refresh by bumping the pin (docs/security.md).

The rules are compiled once per process (about 3 s; 0.3 s from the on-disk cache under the data dir) and the
scanner is shared: web workers build it before they serve (config/gunicorn.py), Celery workers on first use.
Kingfisher can also validate and revoke credentials against providers' APIs; only its local scan is used here,
which opens no connection.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from kingfisher_sdk import Scanner

# Visible rules that report what is not a secret: a client id is sent in the clear with every OAuth request
# (its secret is a rule of its own), an access or user id names an account, and a public key or a PostHog
# project key is embedded in web pages by design. Storing one is no leak.
_IDENTIFIER_RULES = re.compile(r"(?:client|access|user-api)-id(?:\.\d+)?$|public-key$|posthog-project-api-key")

_lock = threading.Lock()


@functools.cache
def scanner() -> Scanner:
    """The process's scanner over the built-in rules (compiled on the first call)."""
    from kingfisher_sdk import Rules, Scanner  # the native library loads here, not at import

    cache = settings.DATA_DIR / "secret-rules"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only data dir: compile every start (3 s) rather than fail
        return Scanner(Rules(cache=False), base64=False)
    return Scanner(Rules(cache_dir=cache), base64=False)


def describe() -> dict[str, Any]:
    """The rules in force: the package's version, how many secret formats they report, and whether this process
    compiled them or read them from the cache (`manage.py secret_rules`)."""
    from kingfisher_sdk import __version__

    rules = scanner().rules
    formats = sum(1 for rule in rules.metadata() if rule["visible"] and not _IDENTIFIER_RULES.search(rule["id"]))
    return {"version": __version__, "formats": formats, "cache": rules.cache_status}


def findings(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each provider token in `text`, in character offsets; the kind is the rule's name
    (`github_pat`, `slack_bot_token`)."""
    encoded = text.encode("utf-8", "surrogatepass")
    with _lock:  # one native scanner per process; a scan of a memory-sized text takes microseconds
        found = scanner().scan(encoded)
    spans: list[tuple[str, int, int]] = []
    ascii_only = len(encoded) == len(text)
    for finding in found:
        if not finding.visible or _IDENTIFIER_RULES.search(finding.rule_id):
            continue
        location = finding.location
        start, end = location["start_offset"], location["end_offset"]
        if not ascii_only:  # Kingfisher counts bytes of UTF-8; a Finding counts characters
            start = len(encoded[:start].decode("utf-8", "surrogatepass"))
            end = len(encoded[:end].decode("utf-8", "surrogatepass"))
        spans.append((_kind(finding.rule_id), start, end))
    return spans


def _kind(rule_id: str) -> str:
    # betterleaks.github-pat → github_pat; veles.secrets/sendgrid → sendgrid; a numbered variant keeps its name.
    name = rule_id.split(".", 1)[-1].rsplit("/", 1)[-1]
    return re.sub(r"\.\d+$", "", name).replace("-", "_")
