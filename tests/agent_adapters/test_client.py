"""agent.httpx_client against the live service: the whole round trip, typed errors with the stable code, an
Idempotency-Key that makes a retried write land once, Retry-After honoured within bounds, timeouts."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import time
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from agent.client import (
    AlreadySuperseded,
    DatabaseUnavailable,
    InvalidArgument,
    LoopmemAPIError,
    LoopmemClient,
    LoopmemTimeout,
    NotFound,
    RateLimited,
    TenantHalted,
)
from agent.httpx_client import AsyncClient, Client, RetryPolicy
from tests.agent_adapters.conftest import Keys, live_db

pytestmark = live_db


def test_remember_recall_correct_history_forget_round_trip(client: Client) -> None:
    made = client.memory_remember(text="The staging deploy needs VPN_PROFILE=ops", tags=["ops"])["data"]
    [hit] = client.memory_recall(query="VPN_PROFILE staging", limit=5)["data"]
    assert hit["memory"]["id"] == made["id"]

    corrected = client.memory_correct(made["id"], text="The staging deploy needs VPN_PROFILE=ops-2")["data"]
    history = client.memory_history(corrected["id"])["data"]
    assert [version["text"] for version in history] == [made["text"], corrected["text"]]
    with pytest.raises(AlreadySuperseded) as stale:
        client.memory_correct(made["id"], text="too late")
    assert stale.value.code == "already_superseded"
    assert stale.value.details["superseded_by"] == corrected["id"]

    assert client.memory_forget(corrected["id"])["data"] == {"id": corrected["id"], "deleted": True}
    exported = client.memory_export()["data"]
    assert [line["text"] for line in exported] == [made["text"]]  # forgetting the correction revived the first


def test_errors_are_typed_and_carry_the_stable_code(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.memory_get("00000000-0000-4000-8000-000000000000")
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert missing.value.envelope()["error"]["code"] == "not_found"
    with pytest.raises(InvalidArgument) as refused:
        client.memory_forget("not-a-uuid")
    assert (refused.value.status, refused.value.code) == (None, "invalid_memory_id")


def test_another_subjects_memory_is_not_found(keys: Keys, client: Client) -> None:
    mine = client.memory_remember(text="coder-1's own fact")["data"]
    with Client(keys.url, keys.key("coder-2")) as other, pytest.raises(NotFound):
        other.memory_get(mine["id"])


def test_a_write_whose_answer_was_lost_is_retried_with_its_key_and_lands_once(keys: Keys) -> None:
    seen: list[str | None] = []
    real = httpx.HTTPTransport()

    class LosesFirstAnswer(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.headers.get("Idempotency-Key"))
            response = real.handle_request(request)
            response.read()
            if len(seen) == 1:  # the server wrote it; the client never hears
                raise httpx.ReadTimeout("lost", request=request)
            return response

        def close(self) -> None:
            real.close()

    key = keys.key("coder-1")
    with Client(keys.url, key, transport=LosesFirstAnswer(), retry=RetryPolicy(base_delay=0.01)) as flaky:
        flaky.memory_remember(text="Written once although sent twice")
    assert len(seen) == 2
    assert seen[0] is not None
    assert seen[0] == seen[1]
    with Client(keys.url, key) as client:
        assert client.memory_list()["meta"]["total_count"] == 1


def scripted(*answers: tuple[int, dict[str, str], dict[str, Any]]) -> tuple[httpx.MockTransport, list[float]]:
    """A transport answering `answers` in turn, and the monotonic time of each request."""
    script = list(answers)
    times: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        times.append(time.monotonic())
        status, headers, body = script.pop(0)
        return httpx.Response(status, headers=headers, json=body)

    return httpx.MockTransport(handle), times


def _error(status: int, code: str) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": code, "details": {}}}


def test_retry_after_is_honoured_then_the_answer_comes() -> None:
    transport, times = scripted(
        (429, {"Retry-After": "1"}, _error(429, "rate_limited")), (200, {}, {"data": [], "meta": {}})
    )
    with Client("http://loopmem.test", "k", transport=transport) as client:
        assert client.memory_list()["data"] == []
    assert len(times) == 2
    assert times[1] - times[0] >= 0.95


def test_a_retry_after_past_the_bound_is_raised_at_once_with_its_value() -> None:
    transport, times = scripted((429, {"Retry-After": "3600"}, _error(429, "rate_limited")))
    with Client("http://loopmem.test", "k", transport=transport) as client, pytest.raises(RateLimited) as limited:
        client.memory_list()
    assert limited.value.retry_after == 3600
    assert len(times) == 1


def test_backoff_is_bounded_and_a_halted_tenant_is_not_retried() -> None:
    transport, times = scripted(*[(503, {}, _error(503, "database_unavailable"))] * 3)
    policy = RetryPolicy(retries=2, base_delay=0.01)
    with (
        Client("http://loopmem.test", "k", transport=transport, retry=policy) as client,
        pytest.raises(DatabaseUnavailable),
    ):
        client.memory_list()
    assert len(times) == 3  # the first try and two retries

    transport, times = scripted((503, {}, _error(503, "tenant_halted")))
    with Client("http://loopmem.test", "k", transport=transport) as client, pytest.raises(TenantHalted):
        client.memory_remember(text="x")
    assert len(times) == 1


def test_a_silent_server_times_out(silent_server: str) -> None:
    with Client(silent_server, "k", timeout=0.3, retry=RetryPolicy(retries=0)) as client, pytest.raises(LoopmemTimeout):
        client.memory_list()


def test_the_async_client_is_the_same_api(async_client: AsyncClient) -> None:
    async def run() -> None:
        async with async_client as client:
            made = (await client.memory_remember(text="Async clients recall ZEBRA-42"))["data"]
            [hit] = (await client.memory_recall(query="ZEBRA-42"))["data"]
            assert hit["memory"]["id"] == made["id"]
            with pytest.raises(NotFound):
                await client.memory_get("00000000-0000-4000-8000-000000000000")

    asyncio.run(run())


def test_a_retry_after_date_is_read_as_the_seconds_until_it() -> None:
    in_an_hour = email.utils.format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    transport, times = scripted((429, {"Retry-After": in_an_hour}, _error(429, "rate_limited")))
    with Client("http://loopmem.test", "k", transport=transport) as client, pytest.raises(RateLimited) as limited:
        client.memory_list()
    assert limited.value.retry_after is not None
    assert 3590 <= limited.value.retry_after <= 3600
    assert len(times) == 1  # past the bound: raised, not slept

    past = email.utils.format_datetime(datetime.now(UTC) - timedelta(minutes=5), usegmt=True)
    transport, times = scripted(
        (503, {"Retry-After": past}, _error(503, "database_unavailable")), (200, {}, {"data": [], "meta": {}})
    )
    with Client("http://loopmem.test", "k", transport=transport) as client:
        assert client.memory_list()["data"] == []
    assert times[1] - times[0] < 0.25  # a date already past means now, not a backoff


@pytest.mark.parametrize("header", ["-5", "nan", "inf", "soon"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_negative_or_unreadable_retry_after_never_breaks_the_retry(header: str, asynchronous: bool) -> None:
    transport, times = scripted(
        (429, {"Retry-After": header}, _error(429, "rate_limited")), (200, {}, {"data": [], "meta": {}})
    )
    policy = RetryPolicy(base_delay=0.05)
    if asynchronous:

        async def run() -> Any:
            async with AsyncClient("http://loopmem.test", "k", transport=transport, retry=policy) as client:
                return await client.memory_list()

        assert asyncio.run(run())["data"] == []
    else:
        with Client("http://loopmem.test", "k", transport=transport, retry=policy) as client:
            assert client.memory_list()["data"] == []
    assert len(times) == 2
    waited = times[1] - times[0]
    if header == "-5":
        assert waited < 0.025  # "now", as a date in the past
    else:
        assert waited >= 0.02  # no hint: the jittered backoff (0.025 s at least)


@pytest.mark.parametrize("dots", [".", "..", ""])
def test_a_dot_segment_id_is_refused_before_sending(dots: str) -> None:
    sent: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.raw_path.decode())  # ".." would have been resolved: /api/v1/memory
        return httpx.Response(200, json={"data": [], "meta": {}})

    with Client("http://loopmem.test", "k", transport=httpx.MockTransport(handle)) as client:
        for call, code in (
            (lambda: client.session_history(dots), "invalid_session_id"),
            (lambda: client.memory_promotion(dots), "invalid_session_id"),
            (lambda: client.article_get(dots), "invalid_article_id"),
            (lambda: client.article_update(dots, title="t"), "invalid_article_id"),
        ):
            with pytest.raises(InvalidArgument) as refused:
                call()
            assert refused.value.code == code
        assert client.session_history("a/../b")["data"] == []  # a slash is encoded: one segment
    assert sent == ["/api/v1/memory/sessions/a%2F..%2Fb"]
    with pytest.raises(InvalidArgument):
        LoopmemClient("http://loopmem.test", "k").session_history(dots)


MEMORY_ID = "00000000-0000-4000-8000-000000000001"
FORGOTTEN = {"data": {"id": MEMORY_ID, "deleted": True}}


def test_a_forget_or_correction_is_not_resent_after_a_503_that_may_have_run() -> None:
    # A proxy's bodiless 503 (or any code not saying nothing ran): the DELETE may have been forwarded and done.
    answers: list[tuple[int, dict[str, str], dict[str, Any]]] = [(503, {}, {}), (503, {}, _error(503, "not_ready"))]
    for answer in answers:
        transport, times = scripted(answer, answer, (200, {}, {"data": []}))
        with Client("http://loopmem.test", "k", transport=transport, retry=RetryPolicy(base_delay=0.01)) as client:
            with pytest.raises(LoopmemAPIError) as refused:
                client.memory_forget(MEMORY_ID)
            assert refused.value.status == 503
            assert len(times) == 1
            assert client.memory_list() == {"data": []}  # a read is resent after the same answer
        assert len(times) == 3


@pytest.mark.parametrize(
    "answer",
    [
        (429, {"Retry-After": "0"}, _error(429, "rate_limited")),
        (503, {}, _error(503, "database_unavailable")),
        (503, {}, _error(503, "database_timeout")),
    ],
)
def test_a_forget_or_correction_is_resent_when_it_never_ran(answer: tuple[int, dict[str, str], Any]) -> None:
    transport, times = scripted(answer, (200, {}, FORGOTTEN), answer, (200, {}, {"data": {"id": MEMORY_ID}}))
    with Client("http://loopmem.test", "k", transport=transport, retry=RetryPolicy(base_delay=0.01)) as client:
        assert client.memory_forget(MEMORY_ID) == FORGOTTEN
        assert client.memory_correct(MEMORY_ID, text="fixed")["data"]["id"] == MEMORY_ID
    assert len(times) == 4


class CountsCloses(httpx.MockTransport):
    def __init__(self) -> None:
        super().__init__(lambda request: httpx.Response(200, json={"data": [], "meta": {}}))
        self.closes = 0

    async def aclose(self) -> None:
        self.closes += 1


def test_each_event_loops_pool_is_closed_as_the_loop_shuts_down() -> None:
    transport = CountsCloses()
    client = AsyncClient("http://loopmem.test", "k", transport=transport)

    async def list_twice() -> None:
        await client.memory_list()
        await client.memory_list()  # the same loop: the same pool

    for runs in range(1, 4):
        asyncio.run(list_twice())
        assert transport.closes == runs  # the loop's own pool, closed with it, not left behind

    async def closed_early() -> None:
        await client.memory_list()
        await client.aclose()
        assert transport.closes == 4
        await client.memory_list()  # a new pool, closed with the loop

    asyncio.run(closed_early())
    assert transport.closes == 5


def test_loops_leave_no_connection_open(keys: Keys) -> None:
    client = AsyncClient(keys.url, keys.key("coder-1"))
    gc.collect()  # what earlier tests left is not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):
            asyncio.run(client.memory_list())  # type: ignore[arg-type]
        gc.collect()
    assert [str(warning.message) for warning in caught if warning.category is ResourceWarning] == []


def test_a_loop_kept_across_runs_keeps_one_pool() -> None:
    # Runner.run_sync's way: one loop per thread, kept open, its generators shut down after every run.
    transport = CountsCloses()
    client = AsyncClient("http://loopmem.test", "k", transport=transport)
    loop = asyncio.new_event_loop()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for _ in range(3):
                loop.run_until_complete(client.memory_list())
                loop.run_until_complete(loop.shutdown_asyncgens())
        # none of ours started after the shutdown, where the loop would not finalize it (httpx's own are)
        assert [str(w.message) for w in caught if "_closed_with_loop" in str(w.message)] == []
        assert transport.closes == 1  # the first run's pool; the next runs share one, open while the loop is
        loop.run_until_complete(client.aclose())
        assert transport.closes == 2
    finally:
        loop.close()
