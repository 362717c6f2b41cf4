"""Writes queue their memories for embedding (loopmem.embedding.work_queue); one drain task per burst embeds them in
provider batches, finishes a dead worker's claim, and leaves nothing stranded on a failure."""

from __future__ import annotations

import time

import pytest
import redis
from celery import current_app
from celery.exceptions import Retry

from loopmem.embedding import embedders, work_queue
from loopmem.embedding.pipeline import EmbeddedTable
from loopmem.embedding.work_queue import Keys
from loopmem.redis import outage
from loopmem.redis.client import redis_client
from loopmem.tenancy.scope import Scope
from memory import services, tasks
from memory.models import Memory

pytestmark = pytest.mark.django_db

DRAIN = "memory.tasks.embed_pending_memories_task"


class BatchRecorder:
    """The test provider, recording the texts of each call; fails texts containing `refuse`, or every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail: embedders.EmbeddingFailure | None = None
        self.refuse = ""

    def embed(self, texts):
        self.calls.append(list(texts))
        if self.fail is not None:
            raise self.fail
        if self.refuse and any(self.refuse in text for text in texts):
            raise embedders.EmbeddingProviderError(400, "input rejected")
        return embedders.HashingEmbedder().embed(texts)


@pytest.fixture
def provider(monkeypatch):
    recorder = BatchRecorder()
    monkeypatch.setitem(embedders.PROVIDERS, "hashing", lambda spec: recorder)
    return recorder


@pytest.fixture
def write(tenant, django_capture_on_commit_callbacks):
    scope = Scope(tenant_id=tenant.id, subject_id="agent-a")

    def write(*texts: str) -> list[str]:
        with django_capture_on_commit_callbacks(execute=True):
            return [str(services.memory_remember(scope=scope, text=text).id) for text in texts]

    return write


def listed(key: str) -> list[str]:
    return [raw.decode() if isinstance(raw, bytes) else raw for raw in redis_client().lrange(key, 0, -1)]


def queued(tenant) -> tuple[list[str], bool]:
    keys = Keys("memories", tenant.id)
    return listed(keys.pending), bool(redis_client().exists(keys.flag))


def embedded(ids: list[str]) -> int:
    return Memory.objects.filter(id__in=ids, embedding__isnull=False).count()


def test_a_burst_of_writes_is_one_task_and_one_provider_call(tenant, write, provider, sent_tasks):
    ids = write("alpha", "beta", "gamma")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))]
    assert queued(tenant) == (ids, True)

    result = tasks.embed_pending_memories_task(str(tenant.id))

    assert result == {"embedded": 3, "failed": 0, "tenants": 0, "failures": {}}
    assert provider.calls == [["alpha", "beta", "gamma"]]
    assert embedded(ids) == 3
    assert queued(tenant) == ([], False)  # drained: the next write schedules a new drain
    write("delta")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))] * 2


def test_a_long_queue_is_drained_in_provider_batches(tenant, write, provider, sent_tasks, monkeypatch):
    monkeypatch.setattr("loopmem.embedding.pipeline.BATCH_SIZE", 2)
    ids = write("a", "b", "c", "d", "e")
    tasks.embed_pending_memories_task(str(tenant.id))
    assert provider.calls == [["a", "b"], ["c", "d"], ["e"]]
    assert embedded(ids) == 5


def test_a_long_backlog_takes_turns_a_drain_queues_itself_again_after_its_batches(
    tenant, write, provider, sent_tasks, monkeypatch
):
    monkeypatch.setattr("loopmem.embedding.pipeline.BATCH_SIZE", 2)
    monkeypatch.setattr("loopmem.embedding.pipeline.DRAIN_BATCHES_PER_TASK", 2)
    ids = write("a", "b", "c", "d", "e")
    tasks.embed_pending_memories_task(str(tenant.id))
    assert embedded(ids) == 4
    assert sent_tasks == [(DRAIN, (str(tenant.id),))] * 2  # the write's, then the drain's own follow-up
    assert queued(tenant) == (ids[4:], True)

    tasks.embed_pending_memories_task(str(tenant.id))  # the follow-up
    assert embedded(ids) == 5
    assert queued(tenant) == ([], False)
    assert len(sent_tasks) == 2


def test_a_redelivered_drain_finishes_the_claim_of_the_worker_that_died(tenant, write, provider, sent_tasks):
    ids = write("held by the dead worker", "still pending")
    # The first delivery claimed one id, then its worker died before storing the vector.
    assert work_queue.claim("memories", tenant.id, "task-1", limit=1) == ids[:1]

    tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-1", throw=True)

    assert provider.calls == [["held by the dead worker"], ["still pending"]]
    assert embedded(ids) == 2
    assert not redis_client().exists(Keys("memories", tenant.id).claim("task-1"))


def test_a_transient_failure_retries_the_task_keeping_its_claim(tenant, write, provider, sent_tasks):
    ids = write("hello")
    provider.fail = embedders.EmbeddingTimeout()
    with pytest.raises(Retry):
        tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-2", throw=True)
    claim = Keys("memories", tenant.id).claim("task-2")
    assert listed(claim) == ids
    assert queued(tenant) == ([], True)  # still scheduled: the retry is the drain

    provider.fail = None
    tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-2", throw=True)
    assert embedded(ids) == 1
    assert queued(tenant) == ([], False)


@pytest.mark.parametrize("failure", [embedders.NoEmbeddingKey(), embedders.EmbeddingProviderError(401)])
def test_a_permanent_failure_drops_the_queue_for_the_sweep(tenant, write, provider, sent_tasks, failure):
    ids = write("one", "two")
    provider.fail = failure
    result = tasks.embed_pending_memories_task(str(tenant.id))
    assert (result["embedded"], result["failed"]) == (0, 2)
    assert embedded(ids) == 0
    assert queued(tenant) == ([], False)
    # The next write starts a new drain rather than waiting behind a dead one.
    write("three")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))] * 2


def test_a_text_the_provider_refuses_does_not_block_the_rest_of_its_batch(tenant, write, provider, sent_tasks):
    ids = write("fine", "refuse me", "also fine")
    provider.refuse = "refuse me"
    result = tasks.embed_pending_memories_task(str(tenant.id))
    assert (result["embedded"], result["failures"]) == (2, {"embedding_provider_error_400": 1})
    assert set(Memory.objects.filter(embedding__isnull=False).values_list("text", flat=True)) == {"fine", "also fine"}
    assert embedded(ids) == 2


def test_an_id_of_another_tenant_in_the_queue_is_never_embedded_with_this_tenants_provider(
    tenant, other_tenant, provider, sent_tasks, django_capture_on_commit_callbacks
):
    foreign = services.memory_remember(scope=Scope(tenant_id=other_tenant.id, subject_id="x"), text="not yours")
    redis_client().rpush(Keys("memories", tenant.id).pending, str(foreign.id))
    tasks.embed_pending_memories_task(str(tenant.id))
    assert provider.calls == []
    assert Memory.objects.get(id=foreign.id).embedding is None


def test_a_publish_that_fails_leaves_the_next_write_to_schedule_the_drain(tenant, write, monkeypatch, sent_tasks):
    def broker_down(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(current_app, "send_task", broker_down)
    ids = write("first")
    assert queued(tenant) == (ids, False)  # queued, but no drain holds the flag
    outage.reset()  # the broker is back
    monkeypatch.setattr(current_app, "send_task", lambda name, args=(), **kw: sent_tasks.append((name, tuple(args))))
    ids += write("second")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))]
    assert queued(tenant) == (ids, True)


def test_a_drain_that_crashes_unexpectedly_unblocks_the_next_write(tenant, write, provider, sent_tasks, monkeypatch):
    write("one")

    def database_gone(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(EmbeddedTable, "stale", database_gone)
    with pytest.raises(RuntimeError):
        tasks.embed_pending_memories_task(str(tenant.id))
    assert queued(tenant) == ([], False)


@pytest.fixture
def countdowns(monkeypatch):
    """The countdown of each task sent (None: at once)."""
    sent: list[float | None] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=(), **kw: sent.append(kw.get("countdown")))
    return sent


def test_the_drain_a_write_schedules_waits_for_the_writes_of_that_moment(tenant, write, provider, countdowns, settings):
    settings.EMBEDDING_DRAIN_DELAY_SECONDS = 0.1
    write("alpha", "beta")
    assert countdowns == [0.1]  # one drain for both, run 0.1 s later


def test_a_delay_of_zero_sends_the_drain_at_once(tenant, write, provider, countdowns, settings):
    settings.EMBEDDING_DRAIN_DELAY_SECONDS = 0
    write("alpha")
    assert countdowns == [None]


def test_a_drain_that_queues_itself_again_runs_at_once(tenant, write, provider, countdowns, settings, monkeypatch):
    settings.EMBEDDING_DRAIN_DELAY_SECONDS = 0.1
    monkeypatch.setattr("loopmem.embedding.pipeline.BATCH_SIZE", 1)
    monkeypatch.setattr("loopmem.embedding.pipeline.DRAIN_BATCHES_PER_TASK", 1)
    write("a", "b")
    tasks.embed_pending_memories_task(str(tenant.id))
    assert countdowns == [0.1, None]  # the backlog is already waiting: no reason to wait again


# --- The flag: seconds of life, renewed while a drain runs, held for a retry, handed to a retry after an outage ---


def flag_ttl(tenant) -> int:
    return int(redis_client().ttl(Keys("memories", tenant.id).flag))


def test_the_flag_a_write_sets_lives_only_seconds(tenant, write, sent_tasks):
    write("alpha")
    assert 0 < flag_ttl(tenant) <= work_queue.FLAG_TTL_SECONDS


def test_a_running_drain_renews_its_flag_while_a_provider_call_outlasts_it(
    tenant, write, provider, sent_tasks, monkeypatch
):
    monkeypatch.setattr(work_queue, "HEARTBEAT_SECONDS", 0.05)
    flag = Keys("memories", tenant.id).flag
    alive_after_its_ttl = []
    slow = provider.embed

    def slow_call(texts):
        redis_client().pexpire(flag, 200)  # as if its last renewal were nearly a TTL ago
        time.sleep(0.4)
        alive_after_its_ttl.append(bool(redis_client().exists(flag)))
        return slow(texts)

    monkeypatch.setattr(provider, "embed", slow_call)
    ids = write("alpha")
    tasks.embed_pending_memories_task(str(tenant.id))
    assert alive_after_its_ttl == [True]
    assert embedded(ids) == 1
    assert queued(tenant) == ([], False)  # drained: cleared, and no renewal after the drain ended


def test_the_flag_of_a_drain_redis_froze_under_lapses_and_the_next_write_sends_a_drain(
    tenant, write, provider, sent_tasks, monkeypatch
):
    monkeypatch.setattr(work_queue, "FLAG_TTL_SECONDS", 1)
    ids = write("alpha")

    def frozen(*args, **kwargs):
        raise redis.TimeoutError("Timeout reading from socket")

    with monkeypatch.context() as frozen_redis:
        frozen_redis.setattr(work_queue, "claim", frozen)
        frozen_redis.setattr(work_queue, "answers_before", lambda deadline: False)  # not back in time
        with pytest.raises(redis.TimeoutError):
            tasks.embed_pending_memories_task(str(tenant.id))
    assert queued(tenant) == (ids, True)  # nothing dropped; the flag is left to lapse, not renewed

    time.sleep(1.1)
    ids += write("beta")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))] * 2
    tasks.embed_pending_memories_task(str(tenant.id))
    assert embedded(ids) == 2


@pytest.fixture
def unreachable_once(monkeypatch):
    """The drain's next claim finds Redis unreachable (it answers again at once)."""
    real_claim = work_queue.claim
    failures = [redis.ConnectionError("Connection reset by peer")]

    def claim(*args, **kwargs):
        if failures:
            raise failures.pop()
        return real_claim(*args, **kwargs)

    monkeypatch.setattr(work_queue, "claim", claim)


def test_a_drain_redis_stopped_answering_hands_its_flag_to_its_retry_when_redis_answers(
    tenant, write, provider, sent_tasks, unreachable_once
):
    ids = write("alpha")
    with pytest.raises(Retry):
        tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-3", throw=True)
    assert queued(tenant) == (ids, True)  # nothing dropped, and the flag is held for the retry

    ids += write("pushed while the retry was due")  # the flag is held: the retry drains it, no new drain
    tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-3", throw=True)
    assert sent_tasks == [(DRAIN, (str(tenant.id),))]
    assert embedded(ids) == 2
    assert queued(tenant) == ([], False)


def test_a_drain_with_no_retry_left_releases_its_flag_when_redis_answers_again(
    tenant, write, provider, sent_tasks, unreachable_once
):
    write("alpha")
    last = tasks.embed_pending_memories_task.max_retries
    with pytest.raises(redis.ConnectionError):
        tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-5", retries=last, throw=True)
    assert queued(tenant) == ([], False)  # given up: the rows are the sweep's, the next write sends a drain
    write("beta")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))] * 2


def test_a_drain_retrying_a_provider_failure_holds_the_flag_until_its_retry_is_due(tenant, write, provider, sent_tasks):
    write("hello")
    provider.fail = embedders.EmbeddingTimeout()
    with pytest.raises(Retry):
        tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="task-4", throw=True)
    assert flag_ttl(tenant) > work_queue.FLAG_TTL_SECONDS  # the first retry's countdown (4 s) and a TTL
    write("meanwhile")
    assert sent_tasks == [(DRAIN, (str(tenant.id),))]


def test_two_drains_of_one_tenant_claim_apart_and_embed_each_row_once(tenant, write, provider, sent_tasks, monkeypatch):
    # A drain that waited in a backed-up queue past the flag's life, and the one the next write sent meanwhile.
    monkeypatch.setattr("loopmem.embedding.pipeline.BATCH_SIZE", 2)
    ids = write("a", "b", "c", "d", "e")
    embed = provider.embed
    second_drain = [str(tenant.id)]

    def second_drain_runs_during_the_first_call(texts):
        if second_drain:
            tasks.embed_pending_memories_task.apply(args=[second_drain.pop()], task_id="drain-2", throw=True)
        return embed(texts)

    monkeypatch.setattr(provider, "embed", second_drain_runs_during_the_first_call)
    tasks.embed_pending_memories_task.apply(args=[str(tenant.id)], task_id="drain-1", throw=True)

    asked = [text for call in provider.calls for text in call]
    assert sorted(asked) == ["a", "b", "c", "d", "e"]
    assert embedded(ids) == 5
    assert queued(tenant) == ([], False)
    write("f")
    assert len(sent_tasks) == 2  # the next write schedules a drain again


# --- A push Redis did not take ------------------------------------------------------------------------------


def test_a_write_redis_did_not_take_is_queued_with_the_tenants_next_push(tenant, write, provider, sent_tasks):
    outage.record_failure("test", OSError("connection refused"))  # the latch: Redis skipped
    ids = write("while redis was down")
    assert queued(tenant) == ([], False)
    assert sent_tasks == []

    outage.reset()
    ids += write("after it came back")
    assert queued(tenant) == (ids, True)
    assert sent_tasks == [(DRAIN, (str(tenant.id),))]
    tasks.embed_pending_memories_task(str(tenant.id))
    assert embedded(ids) == 2


def test_a_push_that_fails_keeps_its_id_for_the_tenants_next_one(
    tenant, other_tenant, write, provider, sent_tasks, monkeypatch, django_capture_on_commit_callbacks
):
    real_script = work_queue._script

    def unreachable(client, source):
        def call(**kwargs):
            raise redis.ConnectionError("Connection refused")

        return call if source == work_queue._PUSH else real_script(client, source)

    with monkeypatch.context() as down:
        down.setattr(work_queue, "_script", unreachable)
        ids = write("lost push")
    outage.reset()

    with django_capture_on_commit_callbacks(execute=True):
        services.memory_remember(scope=Scope(tenant_id=other_tenant.id, subject_id="x"), text="another tenant")
    assert queued(other_tenant)[0] != []
    assert queued(tenant) == ([], False)  # a tenant's kept ids go with its own next push only
    ids += write("next")
    assert queued(tenant) == (ids, True)


def test_ids_kept_for_later_are_bounded(tenant, write, sent_tasks, monkeypatch):
    monkeypatch.setattr(work_queue, "STRANDED_MAX_IDS", 2)
    outage.record_failure("test", OSError("connection refused"))
    ids = write("one", "two", "three")
    outage.reset()
    ids += write("four")
    assert queued(tenant) == ([*ids[:2], ids[3]], True)  # the third is the sweep's
