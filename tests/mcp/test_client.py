"""agent.client: the API's error codes as exceptions, network failures as LoopmemUnreachable, nothing leaked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from agent import client as api
from agent.client import LoopmemClient
from tests.conftest import error
from tests.factories import TenantFactory
from tests.mcp.conftest import live_db


class ScriptedServer(ThreadingHTTPServer):
    """Answers every request with `reply` (status, headers, body) and records (method, path, Authorization)."""

    reply: tuple[int, dict[str, str], bytes] = (200, {}, b"{}")

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def do_GET(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        status, headers, body = self.server.reply
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_DELETE = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url_of(server: ScriptedServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@live_db
def test_each_error_code_is_its_exception_with_the_whole_envelope(agent):
    client = LoopmemClient(agent.url, agent.key)

    with pytest.raises(api.NotFound) as not_found:
        client.memory_forget("00000000-0000-4000-8000-000000000000")
    assert (not_found.value.status, not_found.value.code, not_found.value.message) == (404, "not_found", "Not found")
    assert not_found.value.envelope() == error(404, "not_found", "Not found")

    with pytest.raises(api.ValidationFailed) as invalid:
        client.memory_remember(text="x", confidence=7)
    assert invalid.value.status == 422
    assert set(invalid.value.details) == {"confidence"}

    # A code without a subclass keeps the base class and the code.
    with pytest.raises(api.LoopmemAPIError) as project:
        client.memory_remember(text="x", project_id="nope")
    assert type(project.value) is api.LoopmemAPIError
    assert (project.value.status, project.value.code) == (422, "invalid_project_id")

    with pytest.raises(api.Unauthorized) as unauthorized:
        LoopmemClient(agent.url, "lm_wrong").memory_list()
    assert unauthorized.value.envelope()["error"]["code"] == "unauthorized"


@live_db
def test_429s_carry_their_code_and_retry_after(agent, make_key):
    with override_settings(PROMOTION_BUDGET_PER_HOUR=0), pytest.raises(api.PromotionBudgetExceeded) as budget:
        LoopmemClient(agent.url, agent.key).memory_promote("s-1")
    assert budget.value.status == 429

    small = TenantFactory.create(rate_limit_requests_per_minute=1)
    limited = LoopmemClient(agent.url, make_key("agent", small).raw_key)
    limited.memory_list()
    with pytest.raises(api.RateLimited) as rate_limited:
        limited.memory_list()
    assert rate_limited.value.retry_after is not None
    assert rate_limited.value.retry_after > 0


@live_db
def test_the_methods_return_the_apis_json_bodies(agent):
    client = LoopmemClient(agent.url, agent.key)

    created = client.memory_remember(text="Builds are cached on the runner", tags=["ci"])
    listed = client.memory_list(include_superseded=False, limit=5)
    history = client.session_history("no-such-session")

    assert listed["data"] == [created["data"]]
    assert listed["meta"] == {"total_count": 1, "limit": 5, "offset": 0, "outcome": "success"}
    assert history["data"] == []


def test_no_answer_is_loopmem_unreachable(closed_port, silent_server):
    with pytest.raises(api.LoopmemUnreachable) as refused:
        LoopmemClient(f"http://127.0.0.1:{closed_port}", "lm_k").memory_list()
    assert (refused.value.code, refused.value.status) == ("loopmem_unreachable", None)
    assert str(refused.value).startswith(f"loopmem_unreachable: cannot reach loopmem at http://127.0.0.1:{closed_port}")

    with pytest.raises(api.LoopmemTimeout) as silent:
        LoopmemClient(silent_server, "lm_k", timeout=0.2).memory_list()
    assert isinstance(silent.value, api.LoopmemUnreachable)
    assert silent.value.code == "loopmem_timeout"


def test_a_response_that_is_not_loopmems_is_reported_with_its_status(http_server):
    server = http_server
    server.reply = (502, {"Content-Type": "text/html"}, b"<html>Bad gateway</html>")

    with pytest.raises(api.LoopmemAPIError) as bad_gateway:
        LoopmemClient(url_of(server), "lm_k").memory_list()

    assert (bad_gateway.value.status, bad_gateway.value.code) == (502, "unexpected_response")


def test_redirects_are_not_followed_so_the_key_goes_nowhere_else(http_server):
    server = http_server
    elsewhere = f"{url_of(server)}/elsewhere"
    server.reply = (302, {"Location": elsewhere}, b"")

    with pytest.raises(api.LoopmemAPIError) as redirected:
        LoopmemClient(url_of(server), "lm_secret").memory_list()

    assert (redirected.value.status, redirected.value.code) == (302, "unexpected_redirect")
    assert [path for _, path, _ in server.seen] == ["/api/v1/memory"]


def test_query_parameters_and_headers_are_what_the_api_reads(http_server):
    server = http_server

    LoopmemClient(url_of(server) + "/", "lm_k").memory_list(limit=5, include_superseded=True, source=None)
    LoopmemClient(url_of(server), "lm_k").knowledge_search(query="retry policy", mode="keyword")

    assert server.seen == [
        ("GET", "/api/v1/memory?limit=5&include_superseded=true", "Bearer lm_k"),
        ("GET", "/api/v1/knowledge/search?q=retry+policy&mode=keyword", "Bearer lm_k"),
    ]


@pytest.mark.parametrize("value", ["", "nope", "../projects", "0000000-0000-4000-8000-000000000000", 42, None])
def test_ids_that_go_into_the_path_are_refused_before_any_request(value, closed_port):
    client = LoopmemClient(f"http://127.0.0.1:{closed_port}", "lm_k")  # a request would be LoopmemUnreachable

    with pytest.raises(api.InvalidArgument) as forget:
        client.memory_forget(value)
    with pytest.raises(api.InvalidArgument) as referenced:
        client.recall_referenced(recall_id=value, article_ids=[])

    assert (forget.value.code, forget.value.status) == ("invalid_memory_id", None)
    assert referenced.value.code == "invalid_recall_id"


def test_a_canonical_uuid_is_sent_lowercased(http_server):
    server = http_server

    LoopmemClient(url_of(server), "lm_k").memory_forget(" 0A1B2C3D-0000-4000-8000-00000000000F ")

    assert server.seen == [("DELETE", "/api/v1/memory/0a1b2c3d-0000-4000-8000-00000000000f", "Bearer lm_k")]


def test_the_key_is_never_in_the_clients_repr_and_bad_configuration_is_refused():
    assert "lm_secret" not in repr(LoopmemClient("http://127.0.0.1:8000", "lm_secret"))
    with pytest.raises(ValueError, match="http"):
        LoopmemClient("file:///etc/passwd", "lm_k")
    with pytest.raises(ValueError, match="key"):
        LoopmemClient("http://127.0.0.1:8000", " ")
