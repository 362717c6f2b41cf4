"""Repo URL spellings reduce to one reference."""

from __future__ import annotations

import pytest

from projects.repo_url import RepoRef, parse_repo_url


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("git@github.com:Owner/Repo.git", RepoRef("github.com", "owner/repo")),
        ("https://github.com/owner/repo", RepoRef("github.com", "owner/repo")),
        ("https://github.com/owner/repo.git/", RepoRef("github.com", "owner/repo")),
        ("ssh://git@github.com/owner/repo.git", RepoRef("github.com", "owner/repo")),
        ("https://gitlab.com/group/sub/repo", RepoRef("gitlab.com", "group/sub/repo")),
        ("owner/repo", RepoRef(None, "owner/repo")),
        ("  Owner/Repo.git ", RepoRef(None, "owner/repo")),
    ],
)
def test_spellings(value, expected):
    assert parse_repo_url(value) == expected


@pytest.mark.parametrize("value", ["", "repo", "https://github.com/owner", "git@github.com:", "a b/c"])
def test_non_repositories(value):
    assert parse_repo_url(value) is None


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("https://x-token:[REDACTED:github_token]@github.com/acme/shop.git", "github.com/acme/shop"),
        ("https://[not-an-address]/acme/shop", None),
    ],
)
def test_brackets_urlsplit_cannot_read_are_dropped_or_refused_never_raised(value, key):
    ref = parse_repo_url(value)
    assert (ref.key if ref else None) == key
