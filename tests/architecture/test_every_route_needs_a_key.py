"""Every /api/v1/ route, read from the URL conf (so a new route is covered without anyone remembering), answers
401 `unauthorized` to every method it serves when no key, or an unknown key, is sent."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tests.conftest import error

MISSING = error(401, "unauthorized", "A valid API key is required: send 'Authorization: Bearer <key>'")
UNKNOWN = error(401, "unauthorized", "The API key is missing, unknown, revoked or expired")
ANY_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")


def _routes(patterns: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            found += _routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append((prefix + str(entry.pattern), entry.callback))
    return found


def _concrete(pattern: str) -> str:
    """A real path for a route pattern: every named group filled with a well-formed id."""
    path = _GROUP.sub(str(ANY_ID), pattern)
    return "/" + path.replace("^", "").replace("$", "").replace("\\.", ".")


def _api_requests() -> list[tuple[str, str]]:
    requests = []
    for pattern, view in _routes(get_resolver().url_patterns):
        if not pattern.startswith("api/v1/") or "format" in pattern:
            continue
        actions = getattr(view, "actions", None) or {}
        for method in sorted(actions):
            requests.append((method, _concrete(pattern)))
    return requests


API_REQUESTS = _api_requests()


def test_the_route_list_is_read_from_the_url_conf():
    methods_by_path = {path: method for method, path in API_REQUESTS}
    assert len(API_REQUESTS) >= 17
    assert any(path.endswith("/memory/recall") for path in methods_by_path)


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), API_REQUESTS)
@pytest.mark.parametrize(("header", "expected"), [(None, MISSING), ("Bearer lm_not_a_key", UNKNOWN)])
def test_every_route_refuses_a_request_without_a_valid_key(method, path, header, expected):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = getattr(client, method)(path, {}, format="json")
    assert (response.status_code, response.json()) == (401, expected), (method, path)
