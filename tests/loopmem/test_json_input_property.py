"""Arbitrary JSON at every route that takes JSON: never a 5xx, and a refused write stores nothing.

The values are written as raw JSON text, so they carry what a hostile client can send and Python's `json.dumps`
would not write by default: `\\u0000` and lone-surrogate escapes, `NaN`, `Infinity`, `-Infinity`, literals that
overflow a double (`1e400`), integers of hundreds of digits, deep and wide nesting. Each example puts one such
value in one place of an otherwise valid request (a field, a field's replacement, the whole body, a JSON query
parameter). `-m scale` with LOOPMEM_JSON_PROPERTY_EXAMPLES=2000 is the bigger run (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as examples_of
from hypothesis import strategies as st

from knowledge.models import Article
from memory.models import Memory, PromotionJob, SessionTurn
from projects.models import Project

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])

CI_EXAMPLES = 60
SCALE_EXAMPLES = int(os.environ.get("LOOPMEM_JSON_PROPERTY_EXAMPLES", "2000"))


class Raw:
    """A JSON token written as it is (NaN, Infinity, 1e400, an escaped NUL): no Python value renders to it."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return f"Raw({self.token[:40]!r})"


HOSTILE_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1E+999",
    "0." + "0" * 400 + "1e-400",
    "9" * 500,
    "-" + "9" * 4000,
    '"\\u0000"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"\\udfff x"',
    '"\\ud83d"',
    '"\\u3000"',
    '" \\t\\n"',
    '""',
]

texts = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Cc", "Zs"]), max_size=5),
    st.sampled_from(["", " ", "\u0000", "\ud800", "x" * 300, "true", "1e400", "NaN"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    st.sampled_from(HOSTILE_TOKENS).map(Raw),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=6), st.dictionaries(texts, children, max_size=6)),
    max_leaves=25,
)


def render(value: Any) -> str:
    """Raw JSON text of `value`: lone surrogates as \\u escapes, floats and `Raw` tokens as they are."""
    if isinstance(value, Raw):
        return value.token
    if isinstance(value, float):
        return repr(value).replace("nan", "NaN").replace("inf", "Infinity")
    if isinstance(value, list):
        return "[" + ",".join(render(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{render(str(key))}:{render(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)  # ensure_ascii: NUL and lone surrogates become \u escapes


@dataclass(frozen=True)
class Route:
    """One operation taking JSON, with a valid body to start from."""

    method: str
    path: str
    base: dict[str, Any]
    role: str = "agent"  # projects are a user's to create


def routes(memory_id: str, article_id: str) -> list[Route]:
    turn = {"tier": "session", "session_id": "s-1", "role": "user", "content": "hello"}
    article = {"title": "Deploys", "body": "Deploy on Tuesdays", "category": "finding"}
    return [
        Route("POST", "/api/v1/memory", {"text": "the sky is blue", "tags": ["a"], "metadata": {"k": 1}}),
        Route("POST", "/api/v1/memory", turn),
        Route("POST", "/api/v1/memory/recall", {"query": "sky", "metadata": {"k": 1}, "mode": "hybrid"}),
        Route("POST", "/api/v1/recall", {"query": "sky", "metadata": {"k": 1}}),
        Route("PATCH", f"/api/v1/memory/{memory_id}", {"text": "the sky is grey", "metadata": {"k": 2}}),
        Route("POST", "/api/v1/memory/batch", {"memories": [{"text": "batch one", "metadata": {"k": 1}}]}),
        Route("POST", "/api/v1/memory/promote", {"session_id": "s-1"}),
        Route("POST", "/api/v1/memory/graduate", {"memory_id": memory_id}),
        Route("POST", "/api/v1/knowledge/articles", article),
        Route("PATCH", f"/api/v1/knowledge/articles/{article_id}", {"body": "Deploy on Wednesdays"}),
        Route("POST", "/api/v1/projects", {"name": "Apollo", "slug": "apollo", "metadata": {"k": 1}}, "user"),
        # One JSON line is an NDJSON import of one memory.
        Route("POST", "/api/v1/memory/import", {"text": "imported", "tags": ["a"], "metadata": {"k": 1}}),
        Route("POST", f"/api/v1/recall/{memory_id}/referenced", {"article_ids": [article_id]}),
    ]


@st.composite
def hostile_bodies(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """A valid body with one hostile value in it: a field replaced, a field added, or the whole body."""
    value = draw(json_values)
    where = draw(st.sampled_from(["field", "metadata", "new", "body"]))
    if where == "body":
        return render(value)
    body: dict[str, Any] = dict(base)
    if where == "field":
        body[draw(st.sampled_from(sorted(base)))] = value
    elif where == "metadata":
        body["metadata"] = {"k": value}
    else:
        body[draw(texts)] = value
    return render(body)


def stored() -> tuple[Any, ...]:
    """Everything a write could have stored, versions included."""
    return (
        list(Memory.objects.order_by("id").values_list("id", "text", "tags", "metadata", "confidence")),
        SessionTurn.objects.count(),
        list(Article.objects.order_by("id").values_list("id", "title", "body", "metadata")),
        Project.objects.count(),
        PromotionJob.objects.count(),
    )


@pytest.fixture
def hostile_run(agent: Any, client_for: Any, user_key: Any, settings: Any) -> Callable[[int], None]:
    settings.RATE_LIMIT_PER_KEY_PER_MINUTE = 1_000_000
    settings.MEMORY_QUOTA = 1_000_000
    memory_id = agent.post("/api/v1/memory", {"text": "the sky is blue"}, format="json").json()["data"]["id"]
    article = agent.post(
        "/api/v1/knowledge/articles", {"title": "Seed", "body": "Seed body", "category": "finding"}, format="json"
    )
    article_id = article.json()["data"]["article"]["id"]
    every_route = routes(memory_id, article_id)
    clients = {"agent": agent, "user": client_for(user_key)}

    def run(examples: int) -> None:
        @given(data=st.data())
        @examples_of(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        def one(data: st.DataObject) -> None:
            route = data.draw(st.sampled_from(every_route))
            raw = data.draw(hostile_bodies(route.base))
            before = stored()
            response = clients[route.role].generic(
                route.method, route.path, raw.encode("utf-8", "surrogatepass"), content_type="application/json"
            )
            assert response.status_code < 500, (route, raw, response.content)
            assert "error" in response.json() or response.status_code < 400
            if response.status_code >= 400:
                assert stored() == before, (route, raw, response.status_code)

        one()

    return run


@pytest.fixture
def hostile_query_run(agent: Any, settings: Any) -> Callable[[int], None]:
    settings.RATE_LIMIT_PER_KEY_PER_MINUTE = 1_000_000

    def run(examples: int) -> None:
        @given(value=json_values)
        @examples_of(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        def one(value: Any) -> None:
            text = render(value)
            response = agent.get(f"/api/v1/memory?metadata={quote(text.encode('utf-8', 'surrogatepass'))}")
            assert response.status_code < 500, (text, response.content)
            assert response.status_code in (200, 400, 422), (text, response.content)

        one()

    return run


def test_arbitrary_json_in_a_body_never_answers_5xx_nor_stores_a_refused_write(hostile_run):
    hostile_run(CI_EXAMPLES * 5)


def test_arbitrary_json_in_a_query_parameter_never_answers_5xx(hostile_query_run):
    hostile_query_run(CI_EXAMPLES)


@pytest.mark.scale
def test_arbitrary_json_at_scale(hostile_run, hostile_query_run):
    """By hand: `-m scale -k at_scale` with LOOPMEM_JSON_PROPERTY_EXAMPLES set (docs/reliability.md)."""
    if os.environ.get("LOOPMEM_JSON_PROPERTY_EXAMPLES") is None:
        pytest.skip("set LOOPMEM_JSON_PROPERTY_EXAMPLES to run the scale size (docs/reliability.md)")
    hostile_run(SCALE_EXAMPLES)
    hostile_query_run(SCALE_EXAMPLES // 5)
