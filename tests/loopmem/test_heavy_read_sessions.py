"""Heavy-read sessions: a read that needs no `SET LOCAL` runs in autocommit (no BEGIN, no set_config, one round trip);
one that needs options opens the session's transaction, which holds them until the session ends. The tenant gate
spans the whole session and the structural guard checks every read, in autocommit or not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from knowledge.models import Article
from loopmem.database.router import HEAVY_READ_ALIAS
from loopmem.embedding import embedders
from loopmem.errors import HeavyReadOverloaded
from loopmem.reads import scoped, tenant_gate
from loopmem.reads.hnsw_options import ReadOptions
from loopmem.reads.where_guard import UnscopedHeavyRead
from loopmem.tenancy.scope import Scope
from memory import selectors
from memory.models import Memory
from memory.services import memory_supersede
from tests.memory.conftest import embed_pending, heavy_db, remember

pytestmark = heavy_db

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@pytest.fixture
def twenty(agent: Any) -> None:
    for n in range(20):
        remember(agent, f"fact {n} about topic {n % 4}")
    embed_pending()


def _query() -> list[float]:
    [vector] = embedders.HashingEmbedder().embed(["fact about topic 2"])
    return vector


def _sent(read: Callable[[], Any]) -> tuple[Any, list[str]]:
    heavy = connections[HEAVY_READ_ALIAS]
    with CaptureQueriesContext(heavy) as captured:
        result = read()
    return result, [query["sql"] for query in captured.captured_queries]


def _setting(name: str) -> str:
    """The value in force on the heavy-read connection (pgvector loaded first, so its hnsw.* options exist)."""
    with connections[HEAVY_READ_ALIAS].cursor() as cursor:
        cursor.execute("SELECT '[1]'::vector, current_setting(%s)", [name])
        (_, value) = cursor.fetchone()
    return str(value)


def _in_transaction() -> bool:
    heavy = connections[HEAVY_READ_ALIAS]
    return heavy.in_atomic_block or not heavy.get_autocommit()


def _recall(scope: Scope, **kwargs: Any) -> Any:
    return selectors.recall_by_vector(scope=scope, vector=_query(), model_id="hashing:v1", k=5, **kwargs)


def test_an_exact_recall_sends_only_its_read(tenant: Any, twenty: None) -> None:
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _recall(scope, path="exact")  # the subject's size is cached from here on, as after any subject's first recall
    result, sent = _sent(lambda: _recall(scope, path="exact"))
    assert (result.recall_path, len(result.hits)) == ("exact", 5)
    assert len(sent) == 1, sent  # the kNN read, nothing around it
    assert sent[0].startswith("SELECT")
    assert "<=>" in sent[0]
    assert "set_config" not in sent[0]


def test_an_auto_recall_counts_and_reads_in_autocommit(tenant: Any, twenty: None) -> None:
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    result, sent = _sent(lambda: _recall(scope))
    assert result.recall_path == "exact"
    assert [sql.split()[0] for sql in sent] == ["SELECT", "SELECT"], sent  # the subject's size, then the read
    assert not any("set_config" in sql or sql.startswith(TRANSACTION_CONTROL) for sql in sent)


def test_an_ann_recall_sets_its_options_inside_the_transaction_its_reads_run_in(tenant: Any, twenty: None) -> None:
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    _recall(scope, path="ann")  # the subject's size and pgvector's version are asked once, not part of this read
    result, sent = _sent(lambda: _recall(scope, path="ann"))
    assert (result.recall_path, result.ann_iterative_scan) == ("ann", "applied")
    assert sent[0] == "BEGIN"
    assert sent[1].startswith("SELECT set_config")
    assert "hnsw.iterative_scan" in sent[1]
    assert any("<=>" in sql for sql in sent[2:-1])
    assert sent[-1] == "COMMIT"
    assert not any("statement_timeout" in sql for sql in sent)  # the connection's own, set when it opened
    # SET LOCAL ended with the session: the next autocommit read on this connection runs with the defaults.
    assert _setting("hnsw.iterative_scan") == "off"


def test_options_hold_for_every_read_after_them_until_the_session_ends(tenant: Any, twenty: None) -> None:
    default_ef_search = _setting("hnsw.ef_search")
    rows = Memory.objects.for_scope(Scope(tenant_id=tenant.id, subject_id="agent-a"))
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        assert session.count_all(Memory) == 20
        assert not _in_transaction()
        applied = session.configure(ReadOptions(ef_search=77, iterative_scan=True))
        assert applied.iterative_scan == "applied"
        assert _in_transaction()
        session.fetch(rows[:3])
        session.configure(ReadOptions(ef_search=78, iterative_scan=True))  # a second call: the same transaction
        assert session.count_all(Memory) == 20
        assert (_setting("hnsw.ef_search"), _setting("hnsw.iterative_scan")) == ("78", "relaxed_order")
    assert not _in_transaction()
    assert _setting("hnsw.ef_search") == default_ef_search


def test_the_subject_size_counts_its_live_rows_or_every_version_and_nothing_outside_the_scope(
    tenant: Any, other_tenant: Any, make_key: Any, client_for: Any, agent: Any
) -> None:
    old, new = remember(agent, "the deploy window is Tuesday"), remember(agent, "the deploy window is Thursday")
    memory_supersede(scope=Scope(tenant_id=tenant.id, subject_id="agent-a"), old_id=old["id"], new_id=new["id"])
    remember(client_for(make_key("agent", tenant, agent_id="agent-b")), "agent-b's own fact")
    remember(client_for(make_key("agent", other_tenant, agent_id="agent-a")), "another tenant's agent-a")
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        assert session.count_all(Memory) == 2  # every version: the rows a read including superseded ones scans
        assert session.count_all(Memory, live_only=True) == 1  # the rows a default read scans
    assert Memory.objects.for_scope(scope).count() == 2
    assert Memory.objects.count() == 4


def test_an_error_in_a_session_rolls_its_transaction_back_and_leaves_autocommit(tenant: Any) -> None:
    def failing_read() -> None:
        with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
            session.configure(ReadOptions(ef_search=77))
            raise RuntimeError("the read failed")

    with pytest.raises(RuntimeError):
        failing_read()
    assert not _in_transaction()
    assert _setting("hnsw.ef_search") != "77"


def test_a_tenant_session_reads_in_autocommit_until_it_asks_for_index_order(tenant: Any) -> None:
    articles = Article.objects.filter(tenant_id=tenant.id)
    with scoped.tenant_scoped_session(tenant_id=tenant.id) as session:
        _, sent = _sent(lambda: session.count(articles))
        assert len(sent) == 1
        assert not _in_transaction()
        session.configure(ReadOptions(index_order=True))
        assert _in_transaction()
        assert _setting("enable_sort") == "off"
        session.fetch(articles)
        assert _setting("enable_sort") == "off"
    assert not _in_transaction()
    assert _setting("enable_sort") == "on"


@override_settings(HEAVY_READ_MAX_IN_FLIGHT=1)
def test_the_tenant_gate_spans_the_whole_session_even_with_no_transaction(tenant: Any) -> None:
    with (
        scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a"),
        pytest.raises(HeavyReadOverloaded),
        tenant_gate.tenant_gate(tenant.id),
    ):
        pass
    with (
        scoped.tenant_scoped_session(tenant_id=tenant.id),
        pytest.raises(HeavyReadOverloaded),
        tenant_gate.tenant_gate(tenant.id),
    ):
        pass
    with tenant_gate.tenant_gate(tenant.id):  # both slots were given back
        pass


@pytest.mark.parametrize("configured", [False, True], ids=["autocommit", "in the transaction"])
@pytest.mark.parametrize("method", ["fetch", "values", "values_over"])
def test_the_guard_refuses_an_unscoped_read_in_autocommit_and_in_the_transaction(
    tenant: Any, method: str, configured: bool
) -> None:
    unscoped = Memory.objects.filter(tenant_id=tenant.id)
    with scoped.scoped_session(tenant_id=tenant.id, subject_id="agent-a") as session:
        if configured:
            session.configure(ReadOptions())
        reads = {
            "fetch": lambda: session.fetch(unscoped),
            "values": lambda: session.values(unscoped.values("id")),
            "values_over": lambda: session.values_over(unscoped.values("id"), "SELECT count(*) FROM candidates", []),
        }
        with CaptureQueriesContext(connections[HEAVY_READ_ALIAS]) as captured, pytest.raises(UnscopedHeavyRead):
            reads[method]()
        assert captured.captured_queries == []  # refused before it ran
