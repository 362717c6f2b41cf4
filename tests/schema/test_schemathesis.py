"""The served OpenAPI schema against the running service: schemathesis generates requests for every operation
and checks each answer (no 5xx, documented status, content type and body shape; invalid input refused, valid
input accepted).

It runs against pytest-django's `live_server`: real HTTP to a real WSGI server in this process, so every request
crosses the whole middleware stack (the edge's size and text checks included), its body arrives with a real
Content-Length, and its transaction commits, as a client's would. Bounded and deterministic: a fixed number of
examples per operation, derandomized, a deadline for the whole run. `-m scale` with
LOOPMEM_SCHEMATHESIS_EXAMPLES=200 is the bigger run (docs/reliability.md).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any
from urllib.parse import unquote_to_bytes

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from loopmem.tenancy.services import IssuedKey
from tests.conftest import MakeKey

CI_EXAMPLES = 8
SCALE_EXAMPLES = int(os.environ.get("LOOPMEM_SCHEMATHESIS_EXAMPLES", "200"))
# The whole CI run stops generating after this many seconds (each operation keeps at least one example).
CI_DEADLINE_SECONDS = 100

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "heavy_read"])


# A valid request may still be refused for what the service holds, or for a rule across fields, which no schema
# can state: a well-formed project id that names none of your projects, a resolve with no identifier, an
# article id this recall did not surface, a text the secret policy refuses, the subject's quota, an
# Idempotency-Key an earlier case already sent with another body (the generator repeats short keys). Code by
# code, nothing broader: any other 4xx to a schema-valid request fails the run.
STATE_CODES = frozenset(
    {
        "invalid_project_id",
        "no_identifier",
        "not_surfaced",
        "secret_detected",
        "quota_exceeded",
        "idempotency_key_reused",
    }
)
# positive_data_acceptance runs as `valid_data_accepted` (below); negative_data_rejection runs as it is.
EXCLUDED_CHECKS = [positive_data_acceptance]


# The tag filters take repeated values, each of which may be comma-separated, and bound the tags after splitting
# (50). OpenAPI bounds the number of values (maxItems) and each value's shape (a pattern), never a count across
# values, so no schema is exact: one tight enough never to allow more than 50 tags (a pattern bounding each value's
# commas) forbids requests the service accepts, which the negative check would flag instead. The schema bounds the
# values (50) and each tag (200 characters), and this allowance takes the rest: a 422 naming only the tag filters,
# for a case that comma-separates them.
SPLIT_TAG_FILTERS = frozenset({"tags", "tags_any"})


def valid_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' positive_data_acceptance, except for a 422 whose code is one of STATE_CODES, or a tag filter
    over its bound only once its comma-separated values are split."""
    if response.status_code == 422 and (_code(response) in STATE_CODES or _split_tags_over_bound(response, case)):
        return None
    return positive_data_acceptance(ctx, response, case)


def _split_tags_over_bound(response: Any, case: Any) -> bool:
    if _code(response) != "validation_failed":
        return False
    try:
        fields = set(response.json()["error"]["details"])
    except (ValueError, KeyError, TypeError):
        return False
    query = case.query or {}
    comma_split = any("," in str(value) for name in fields & SPLIT_TAG_FILTERS for value in _values(query.get(name)))
    return bool(fields) and fields <= SPLIT_TAG_FILTERS and comma_split


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


ADDITIONAL_CHECKS = [valid_data_accepted]


def _sent_nul(response: Any) -> bool:
    """Whether the request held a NUL, raw or as a JSON escape, in its URL or its body."""
    sent = response.request
    body = sent.body if isinstance(sent.body, bytes) else str(sent.body or "").encode()
    return any(nul in part for part in (unquote_to_bytes(sent.url), body) for nul in (b"\x00", b"\\u0000"))


def _code(response: Any) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


class Run:
    """What one run did: cases sent per operation, the statuses answered, the failures by check (and one report
    of each operation's first failure of a check), and when it must stop."""

    def __init__(self, deadline_seconds: float | None) -> None:
        self.started = time.monotonic()
        self.deadline_seconds = deadline_seconds
        self.cases: Counter[str] = Counter()
        self.with_nul: Counter[int] = Counter()  # status → cases that sent a NUL (in the URL or the body)
        self.statuses: Counter[int] = Counter()
        self.failures_by_check: Counter[str] = Counter()
        self.failures: dict[tuple[str, str], str] = {}

    def record(self, where: str, group: FailureGroup) -> None:
        for failure in group.exceptions:
            self.failures_by_check[failure.title] += 1
            self.failures.setdefault((where, failure.title), f"{where}: {group}")

    def out_of_time(self, label: str) -> bool:
        # Every operation gets at least one case; past the deadline the rest of its examples are skipped.
        late = self.deadline_seconds is not None and time.monotonic() - self.started > self.deadline_seconds
        return late and self.cases[label] > 0

    def report(self) -> str:
        seconds = time.monotonic() - self.started
        load = os.getloadavg()[0]
        return (
            f"schemathesis: {sum(self.cases.values())} cases over {len(self.cases)} operations in {seconds:.1f}s "
            f"(load average {load:.2f}); statuses {dict(sorted(self.statuses.items()))}; "
            f"with a NUL {dict(sorted(self.with_nul.items()))}; failures by check {dict(self.failures_by_check) or 0}"
        )


@pytest.fixture
def keys(make_key: MakeKey, tenant: Any, settings: Any) -> dict[str, IssuedKey]:
    # The run sends hundreds of requests a minute from one key and writes past the test settings' small quota:
    # neither limit is what is under test here (each has its own tests).
    settings.RATE_LIMIT_PER_KEY_PER_MINUTE = 1_000_000
    settings.MEMORY_QUOTA = 100_000
    return {"agent": make_key("agent", tenant, agent_id="fuzz-agent"), "superadmin": make_key("superadmin", None)}


def _headers(case: Any, keys: dict[str, IssuedKey], tenant: Any) -> dict[str, str]:
    """An agent key, but a superadmin impersonating the tenant for the superadmin-only erasure."""
    if case.operation.path == "/api/v1/erasures":
        return {"Authorization": f"Bearer {keys['superadmin'].raw_key}", "X-Impersonate-Tenant": str(tenant.id)}
    return {"Authorization": f"Bearer {keys['agent'].raw_key}"}


def _schema(live_server: Any) -> Any:
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/")
    # NUL characters are generated: the schema states the edge's refusal of them (a `pattern` on every string,
    # `patternProperties` on every object), so a valid case holds none and an invalid one may. UTF-8 text cannot
    # hold a lone surrogate, so none is generated; the edge's refusal of those has its own tests
    # (tests/loopmem/test_edge_input.py).
    # The test sends its own key with every case (`_headers`), so schemathesis does not generate the
    # Authorization header: a negative case whose only flaw was a missing key would reach the service with one.
    # A missing, wrong or revoked key has its own tests (tests/loopmem/test_auth.py).
    schema.config.generation.update(allow_x00=True, deterministic=True, codec="utf-8", with_security_parameters=False)
    return schema


def run_schemathesis(live_server: Any, keys: dict[str, IssuedKey], tenant: Any, run: Run, examples: int) -> list[str]:
    """Every operation, valid and invalid requests, `examples` of each; the failures' reports (empty: none).

    Every case is checked and every failure counted (not only an operation's first), so one run lists them all.
    """
    errors: list[str] = []
    for result in _schema(live_server).get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                run_operation(operation, mode, keys, tenant, run, examples)
            except Exception as exc:  # a strategy that cannot generate, say: reported, not fatal to the others
                errors.append(f"{operation.label} ({mode.value}): {type(exc).__name__}: {exc}")
    return errors + list(run.failures.values())


def run_operation(
    operation: Any, mode: GenerationMode, keys: dict[str, IssuedKey], tenant: Any, run: Run, examples: int
) -> None:
    """`examples` cases of one operation in one mode: each sent, counted and checked; failures recorded."""
    where = f"{operation.label} ({mode.value})"

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def one(case: Any) -> None:
        label = case.operation.label
        if run.out_of_time(label):
            return
        headers = _headers(case, keys, tenant)
        response = case.call(headers=headers)
        run.cases[label] += 1
        run.statuses[response.status_code] += 1
        if _sent_nul(response):
            run.with_nul[response.status_code] += 1
        try:
            case.validate_response(
                response,
                excluded_checks=EXCLUDED_CHECKS,
                additional_checks=ADDITIONAL_CHECKS,
                headers=headers,
                transport_kwargs={"headers": headers},
            )
        except FailureGroup as exc:
            run.record(where, exc)

    one()


def test_every_operation_answers_as_the_schema_says(live_server: Any, keys: dict[str, IssuedKey], tenant: Any) -> None:
    run = Run(CI_DEADLINE_SECONDS)
    failures = run_schemathesis(live_server, keys, tenant, run, CI_EXAMPLES)
    print(run.report())  # noqa: T201  (the figures of the run, with -s)
    assert not failures, "\n\n".join(failures)
    assert len(run.cases) >= 25


@pytest.mark.scale
def test_every_operation_at_scale(live_server: Any, keys: dict[str, IssuedKey], tenant: Any) -> None:
    """The bigger run, by hand: `-m scale -k at_scale -s` (LOOPMEM_SCHEMATHESIS_EXAMPLES, default 200)."""
    if os.environ.get("LOOPMEM_SCHEMATHESIS_EXAMPLES") is None:
        pytest.skip("set LOOPMEM_SCHEMATHESIS_EXAMPLES to run the scale size (docs/reliability.md)")
    run = Run(None)
    failures = run_schemathesis(live_server, keys, tenant, run, SCALE_EXAMPLES)
    print(run.report(), f"failures: {len(failures)}")  # noqa: T201  (the figures for docs/reliability.md)
    assert not failures, "\n\n".join(failures)
