"""Repository URLs in their three spellings reduced to one comparable reference.

`git@host:owner/repo.git` and `https://host/owner/repo(.git)` → host + `owner/repo`; bare `owner/repo`
→ no host. Lowercase, no `.git`, no slashes at the ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>[^/\s].*)$")


@dataclass(frozen=True)
class RepoRef:
    """A parsed repository reference."""

    host: str | None
    path: str  # owner/repo (or group/subgroup/repo)

    @property
    def key(self) -> str:
        """What Project.repo_key stores: `host/path`, or `path` for a bare reference."""
        return f"{self.host}/{self.path}" if self.host else self.path


def parse_repo_url(value: str) -> RepoRef | None:
    """The reference a repo URL names, or None when it names no owner/repo."""
    text = value.strip()
    host: str | None
    if "://" in text:
        parts = _split(text)
        if parts is None:
            return None
        host, path = parts.hostname, parts.path
    elif match := _SCP_LIKE.match(text):
        host, path = match["host"], match["path"]
    else:
        host, path = None, text
    path = path.strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4]
    segments = [s for s in path.split("/") if s]
    if len(segments) < 2 or any(" " in s for s in segments):
        return None
    return RepoRef(host=host.lower() if host else None, path="/".join(segments).lower())


def _split(url: str) -> SplitResult | None:
    """urlsplit, past credentials it cannot read: brackets in the user part (a redacted `[REDACTED:…]` password)
    look to it like an IPv6 host and raise. The credentials name no repository, so they are dropped; a URL that
    still does not split names none (None, never a 500)."""
    try:
        return urlsplit(url)
    except ValueError:
        scheme, _, rest = url.partition("://")
        authority, slash, path = rest.partition("/")
        try:
            return urlsplit(f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}")
        except ValueError:
            return None
