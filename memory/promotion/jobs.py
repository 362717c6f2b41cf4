"""Promotion jobs: trigger (explicit or sweep) → budget reservation + in-flight job → worker: fingerprint vs
watermark → compile → confidence gate → cross-link check → persist → watermark (reference §4.12, DESIGN §7).
Every stage logs a structured `memory_promotion.<stage>` event."""

from __future__ import annotations

import contextlib
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from loopmem.errors import NotFound, PromotionBudgetExceeded
from loopmem.models import Tenant
from loopmem.observability import metrics
from loopmem.runtime.task_queue import enqueue_on_commit
from loopmem.tenancy.scope import Scope
from memory.models import PromotionJob, SessionPromotion
from memory.promotion import compilers
from memory.promotion.compilers import EVAL_SUBJECT_ID, CompileFailed, Compiler, Fingerprint
from memory.promotion.events import emit
from memory.promotion.persist import EmbeddingsDegraded, PersistSummary, PromotionQuotaExceeded, promotion_persist

_BUDGET_LOCK_CLASS = zlib.crc32(b"loopmem_memory_promotion_budget") - 2**31
DEGRADED_SNOOZE_SECONDS = 300
MAX_SNOOZES = 12  # about an hour of waiting (degraded embeddings, a rate-limited LLM), then it fails visibly
MAX_RUNS = 5  # deliveries of one job, crashes included, before the rescue gives up on it
MAX_COMPILE_ATTEMPTS = 2
STALE_PENDING = timedelta(minutes=10)
STALE_RUNNING = timedelta(minutes=30)
PROMOTE_SESSION_TASK = "memory.tasks.promote_session_task"
State, Status = PromotionJob.State, PromotionJob.Status


# --- Budget and the in-flight ledger ------------------------------------------------------------------------


def compiles_this_hour(tenant_id: uuid.UUID, *, excluding: uuid.UUID | None = None) -> int:
    """Compiles (LLM calls) the tenant's jobs made in the last hour: the budget counts calls, not sessions."""
    since = timezone.now() - timedelta(hours=1)
    compiled = PromotionJob.objects.filter(tenant_id=tenant_id, compiled_at__gte=since)
    if excluding is not None:
        compiled = compiled.exclude(id=excluding)
    return compiled.count()


def promotion_reserve(
    *, tenant_id: uuid.UUID, subject_id: str, session_id: str, trigger: str
) -> tuple[PromotionJob, bool]:
    """Reserve one compile of the tenant's hourly budget and record the in-flight job; enqueue it on commit.

    Returns (job, created). A session already in flight returns its job (created False) and spends nothing.
    Under a per-tenant advisory lock the budget counts the last hour's compiles plus in-flight jobs, so
    concurrent triggers cannot overshoot it, and re-promoting one session cannot spend more than one unit per
    compile. Over budget → PromotionBudgetExceeded, before any LLM call; the refusal is recorded as a finished
    `budget_exceeded` job, which is neither in flight nor a compile, so it spends nothing of the budget.
    """
    compiler = compilers.compiler_for(Tenant.objects.get(id=tenant_id)).name
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_BUDGET_LOCK_CLASS, _tenant_lock_key(tenant_id)])
        in_flight = PromotionJob.objects.filter(tenant_id=tenant_id, state__in=PromotionJob.IN_FLIGHT)
        existing = in_flight.filter(subject_id=subject_id, session_id=session_id).first()
        if existing is not None:
            return existing, False
        since = timezone.now() - timedelta(hours=1)
        # Compiles of the last hour plus jobs still in flight (each may compile), counted once each.
        used = (
            PromotionJob.objects.filter(tenant_id=tenant_id)
            .filter(Q(compiled_at__gte=since) | Q(state__in=PromotionJob.IN_FLIGHT))
            .count()
        )
        refused = used >= settings.PROMOTION_BUDGET_PER_HOUR
        if refused:
            _record_refusal(tenant_id, subject_id, session_id, trigger=trigger, compiler=compiler)
        else:
            try:
                with transaction.atomic():
                    job = PromotionJob.objects.create(
                        tenant_id=tenant_id,
                        subject_id=subject_id,
                        session_id=session_id,
                        trigger=trigger,
                        compiler=compiler,
                    )
            except IntegrityError:  # the partial unique index: a job created outside this lock (none does today)
                return in_flight.get(subject_id=subject_id, session_id=session_id), False
            enqueue_on_commit(PROMOTE_SESSION_TASK, str(job.id))
    if refused:
        # Raised outside the block: the refusal's record commits, the caller still gets the 429.
        emit("budget_exceeded", tenant_id=tenant_id, count=1, trigger=trigger)
        raise PromotionBudgetExceeded(details={"budget_per_hour": settings.PROMOTION_BUDGET_PER_HOUR})
    return job, True


def _record_refusal(tenant_id: uuid.UUID, subject_id: str, session_id: str, *, trigger: str, compiler: str) -> None:
    """The session's latest job becomes this refusal; repeated refusals refresh one row rather than pile up."""
    now = timezone.now()
    jobs = PromotionJob.objects.filter(tenant_id=tenant_id, subject_id=subject_id, session_id=session_id)
    latest = jobs.order_by("-inserted_at").first()
    if latest is not None and latest.status == Status.BUDGET_EXCEEDED:
        jobs.filter(id=latest.id).update(
            trigger=trigger, compiler=compiler, inserted_at=now, updated_at=now, finished_at=now
        )
        return
    PromotionJob.objects.create(
        tenant_id=tenant_id,
        subject_id=subject_id,
        session_id=session_id,
        trigger=trigger,
        compiler=compiler,
        state=State.DISCARDED,
        outcome="budget_exceeded",
        finished_at=now,
    )


def _tenant_lock_key(tenant_id: uuid.UUID) -> int:
    return int.from_bytes(tenant_id.bytes[:4], "big", signed=True)


def promotion_request(*, scope: Scope, session_id: str) -> PromotionJob:
    """The explicit trigger. Another subject's session id is a scoped no-op: the worker reads only ours."""
    job, _ = promotion_reserve(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, session_id=session_id, trigger="explicit"
    )
    return job


def promotion_status(*, scope: Scope, session_id: str) -> PromotionJob:
    """The caller's last promotion job for one of its sessions. Another subject's session, or one never
    promoted, is the same 404: the answer says nothing about whether the session exists."""
    job = PromotionJob.objects.for_scope(scope).filter(session_id=session_id).order_by("-inserted_at", "-id").first()
    if job is None:
        raise NotFound("No promotion of this session was found.")
    return job


# --- The worker -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOutcome:
    """What the task should do next: finished (`retry_in` None) or run again in `retry_in` seconds."""

    outcome: str
    retry_in: float | None = None


def promotion_run(*, job_id: str, compiler: Compiler | None = None) -> RunOutcome:
    """Run one in-flight job (reference §4.12 perform). Idempotent: a finished or unknown job is a no-op, and so is
    a second delivery while a live worker runs the job; the delivery that follows a dead worker's resumes it."""
    with _run_lease(uuid.UUID(job_id)) as held:
        if not held:
            return RunOutcome("gone")  # a live worker holds the job
        job = _claim(job_id)
        if job is None:
            return RunOutcome("gone")
        if job.attempts > MAX_RUNS:  # each run that ended in a crash counted one attempt
            emit("failed", tenant_id=job.tenant_id, count=1, stage="claim", session_id=job.session_id)
            return _finish(job, "gave_up_after_crashes", state=State.FAILED)
        return _run(job, compiler)


@contextmanager
def _run_lease(job_id: uuid.UUID) -> Iterator[bool]:
    """A session-level advisory lock held on the worker's own database connection while it runs the job.

    PostgreSQL drops it when that connection ends, so a job still `running` whose lease is free was left by a
    worker that died (`kill -9`, OOM): the redelivered message takes it over at once instead of leaving it to the
    rescue half an hour later; while the lease is held, a duplicate delivery does nothing. (This needs a session
    that outlives the run: a transaction-pooling bouncer in front of PostgreSQL would break it.)
    """
    key = run_lease_key(job_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        row = cursor.fetchone()
    held = bool(row and row[0])
    try:
        yield held
    finally:
        if held:
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                # A connection lost meanwhile took the lease with it.
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def run_lease_key(job_id: uuid.UUID) -> int:
    """The job's advisory-lock key, in the one-bigint form (apart from the two-int locks of budget and quota)."""
    return int.from_bytes(job_id.bytes[:8], "big", signed=True)


def _claim(job_id: str) -> PromotionJob | None:
    """Mark an in-flight job running, counting the attempt; a pending job, or a running one whose worker died."""
    now = timezone.now()
    claimed = PromotionJob.objects.filter(id=job_id, state__in=PromotionJob.IN_FLIGHT).update(
        state=State.RUNNING,
        attempts=F("attempts") + 1,
        updated_at=now,
        started_at=Coalesce(F("started_at"), now),
    )
    return PromotionJob.objects.select_related("tenant").filter(id=job_id).first() if claimed else None


def _run(job: PromotionJob, compiler: Compiler | None) -> RunOutcome:
    tenant = job.tenant
    scope = Scope(tenant_id=tenant.id, subject_id=job.subject_id)
    if job.subject_id == EVAL_SUBJECT_ID:
        return _finish(job, "skipped_eval")
    turns = compilers.load_turns(scope=scope, session_id=job.session_id)
    fingerprint = compilers.session_fingerprint(turns)
    if fingerprint.turn_count <= 1:
        # No watermark and no budget: junk sessions cannot starve the tenant. Nothing to compile is a success.
        return _finish(job, "skipped_too_short", skipped=True)
    watermark = SessionPromotion.objects.filter(
        tenant=tenant, subject_id=job.subject_id, session_id=job.session_id
    ).first()
    if watermark is not None and watermark.session_content_hash == fingerprint.content_hash:
        return _finish(job, "skipped_unchanged", skipped=True)
    if compiles_this_hour(tenant.id, excluding=job.id) >= settings.PROMOTION_BUDGET_PER_HOUR:
        emit("budget_exceeded", tenant_id=tenant.id, count=1, stage="worker")
        return _finish(job, "budget_exceeded", state=State.DISCARDED)

    compiler = compiler or compilers.compiler_for(tenant)
    job.compiler, job.compiled_at = compiler.name, timezone.now()
    job.save(update_fields=["compiler", "compiled_at", "updated_at"])
    try:
        with metrics.timer(metrics.PROMOTION_COMPILE_SECONDS, compiler=compiler.name):
            compiled = compiler.compile(turns)
    except CompileFailed as failure:
        if failure.rate_limited:
            return _snooze(job, "llm_rate_limited", failure.retry_after or 60)
        emit("failed", tenant_id=tenant.id, count=1, stage="compile", reason=failure.reason, session_id=job.session_id)
        if job.attempts >= MAX_COMPILE_ATTEMPTS:
            return _finish(job, f"compile_failed:{failure.reason}", state=State.FAILED)
        return _again(job, f"compile_retry:{failure.reason}", 30 * job.attempts)
    screened = compilers.screen(compiled, turns=turns, scope=scope)
    job.candidates, job.gated_out, job.quarantined = len(compiled), screened.gated_out, len(screened.quarantined)
    emit("compiled", tenant_id=tenant.id, candidates=len(compiled), session_id=job.session_id)
    for rule, count in Counter(rule for _, rule in screened.quarantined).items():
        # The rule, never the text: the log must not carry the payload on to wherever logs go.
        metrics.PROMOTION_QUARANTINED.labels(rule=rule).inc(count)
        emit("quarantined", tenant_id=tenant.id, count=count, rule=rule, session_id=job.session_id)
    if screened.gated_out:
        emit("gated_out", tenant_id=tenant.id, count=screened.gated_out)

    try:
        summary = promotion_persist(
            scope=scope, session_id=job.session_id, candidates=screened.kept, on_written=_progress_recorder(job)
        )
    except EmbeddingsDegraded as degraded:
        _count(job, degraded.summary)
        emit("degraded", tenant_id=tenant.id, reason=str(degraded), session_id=job.session_id)
        return _snooze(job, f"degraded:{degraded}", DEGRADED_SNOOZE_SECONDS)
    except PromotionQuotaExceeded as quota:
        done = quota.summary
        dropped = len(screened.kept) - (done.promoted + done.superseded + done.deduped + done.secret_dropped)
        _advance_watermark(scope, job.session_id, fingerprint)
        emit("quota_exceeded", tenant_id=tenant.id, count=1, dropped=dropped, session_id=job.session_id)
        _count(job, done)
        return _finish(job, "quota_exceeded", state=State.DISCARDED, dropped=dropped)
    _advance_watermark(scope, job.session_id, fingerprint)
    if summary.secret_dropped:
        emit("secret_dropped", tenant_id=tenant.id, count=summary.secret_dropped, session_id=job.session_id)
    emit("promoted", tenant_id=tenant.id, count=summary.promoted, session_id=job.session_id)
    if summary.superseded:
        emit("superseded", tenant_id=tenant.id, count=summary.superseded)
    _count(job, summary)
    return _finish(job, "promoted")


_COUNTS = ["candidates", "gated_out", "quarantined", "deduplicated", "superseded", "written", "memory_ids"]


def _count(job: PromotionJob, summary: PersistSummary) -> None:
    """This attempt's persist figures; the memory ids (and `written`) cover every attempt of the job."""
    job.deduplicated, job.superseded = summary.deduped, summary.superseded
    # Candidates dropped for holding a secret: never written, whatever the tenant's policy (docs/security.md).
    job.detail = {**job.detail, "secret_dropped": summary.secret_dropped}
    job.memory_ids = list(dict.fromkeys([*job.memory_ids, *(uuid.UUID(i) for i in summary.memory_ids)]))
    job.written = len(job.memory_ids)


def _progress_recorder(job: PromotionJob) -> Callable[[uuid.UUID], None]:
    """Record each written memory on the job inside the transaction that writes it: the status endpoint shows
    progress while the job runs, and a run that dies midway leaves the job naming exactly what it wrote."""

    def record(memory_id: uuid.UUID) -> None:
        job.memory_ids = [*job.memory_ids, memory_id]
        job.written = len(job.memory_ids)
        PromotionJob.objects.filter(id=job.id).update(
            memory_ids=job.memory_ids, written=job.written, updated_at=timezone.now()
        )

    return record


def _finish(
    job: PromotionJob, outcome: str, *, state: str = State.DONE, skipped: bool = False, **detail: Any
) -> RunOutcome:
    """Finish the job; its caller-facing status follows from (state, outcome) (see PromotionJob.status)."""
    if skipped:
        emit("skipped", tenant_id=job.tenant_id, reason=outcome, session_id=job.session_id)
    job.state, job.outcome, job.finished_at = state, outcome, timezone.now()
    job.detail = {**job.detail, **detail}
    job.save(update_fields=["state", "outcome", "finished_at", "detail", "updated_at", *_COUNTS])
    return RunOutcome(outcome)


def _again(job: PromotionJob, outcome: str, seconds: float, *, count_attempt: bool = True) -> RunOutcome:
    """Back to pending (still in flight, still holding its budget) to run again in `seconds`."""
    job.state, job.outcome = State.PENDING, outcome
    if not count_attempt:
        job.attempts -= 1
    job.save(update_fields=["state", "outcome", "attempts", "detail", "updated_at", *_COUNTS])
    return RunOutcome(outcome, retry_in=seconds)


def _snooze(job: PromotionJob, outcome: str, seconds: float) -> RunOutcome:
    """Wait without spending an attempt (a busy provider, degraded embeddings), but not forever."""
    snoozes = int(job.detail.get("snoozes", 0)) + 1
    if snoozes > MAX_SNOOZES:
        emit("failed", tenant_id=job.tenant_id, count=1, stage="snooze", reason=outcome, session_id=job.session_id)
        return _finish(job, f"{outcome.split(':')[0]}_too_long", state=State.FAILED)
    job.detail = {**job.detail, "snoozes": snoozes}
    return _again(job, outcome, seconds, count_attempt=False)


def _advance_watermark(scope: Scope, session_id: str, fingerprint: Fingerprint) -> None:
    SessionPromotion.objects.update_or_create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        session_id=session_id,
        defaults={
            "session_content_hash": fingerprint.content_hash,
            "last_turn_inserted_at": fingerprint.last_turn_inserted_at,
            "last_turn_seq": fingerprint.last_turn_seq,
            "promoted_at": timezone.now(),
        },
    )


# --- The sweep ----------------------------------------------------------------------------------------------

_SWEEP_CANDIDATES = """
WITH pending AS (
    SELECT s.tenant_id, s.subject_id, s.session_id, max(s.inserted_at) AS last_at
    FROM session_memories s
    LEFT JOIN session_promotions w
           ON w.tenant_id = s.tenant_id AND w.subject_id = s.subject_id AND w.session_id = s.session_id
    WHERE s.subject_id <> %(eval_subject)s AND s.expires_at > %(now)s
    GROUP BY s.tenant_id, s.subject_id, s.session_id, w.last_turn_inserted_at, w.last_turn_seq
    HAVING count(*) > 1
       AND (w.last_turn_inserted_at IS NULL
            OR max(s.inserted_at) > w.last_turn_inserted_at
            OR (max(s.inserted_at) = w.last_turn_inserted_at AND max(s.seq) > coalesce(w.last_turn_seq, -1)))
)
SELECT tenant_id, subject_id, session_id
FROM (SELECT *, row_number() OVER (PARTITION BY tenant_id ORDER BY last_at) AS turn FROM pending) ranked
ORDER BY turn, last_at
LIMIT %(scan_limit)s
"""


@dataclass
class SweepReport:
    sessions: int = 0
    enqueued: int = 0
    already_in_flight: int = 0
    over_budget: int = 0
    rescued: int = 0


def promotion_sweep() -> SweepReport:
    """Hourly: enqueue sessions with turns newer than their watermark, within each tenant's budget.

    Tenants take turns (each tenant's oldest session, then each one's second oldest, ...), oldest first within a
    tenant, so neither a session near its TTL nor a quiet tenant behind a busy one is starved.
    """
    report = SweepReport(rescued=rescue_stale_jobs())
    with connection.cursor() as cursor:
        cursor.execute(
            _SWEEP_CANDIDATES,
            {"eval_subject": EVAL_SUBJECT_ID, "now": timezone.now(), "scan_limit": settings.PROMOTION_SWEEP_SCAN_LIMIT},
        )
        candidates = cursor.fetchall()
    per_tenant: Counter[str] = Counter()
    over_budget: set[uuid.UUID] = set()
    for tenant_id, subject_id, session_id in candidates:
        if report.enqueued >= settings.PROMOTION_SWEEP_MAX_PER_TICK:
            break
        report.sessions += 1
        if tenant_id in over_budget:
            report.over_budget += 1
            continue
        try:
            _, created = promotion_reserve(
                tenant_id=tenant_id, subject_id=subject_id, session_id=session_id, trigger="sweep"
            )
        except PromotionBudgetExceeded:
            over_budget.add(tenant_id)
            report.over_budget += 1
            continue
        if created:
            report.enqueued += 1
            per_tenant[str(tenant_id)] += 1
        else:
            report.already_in_flight += 1
    for tenant_id, enqueued in per_tenant.items():
        emit("swept", tenant_id=tenant_id, enqueued=enqueued)
    return report


def rescue_stale_jobs() -> int:
    """Re-enqueue jobs whose message was lost (broker down at enqueue, worker killed): the ledger remembers them.

    A job that keeps dying mid-run (a crash each time) is failed after MAX_RUNS instead of looping forever.
    """
    now = timezone.now()
    stale = PromotionJob.objects.filter(state=State.PENDING, updated_at__lt=now - STALE_PENDING) | (
        PromotionJob.objects.filter(state=State.RUNNING, updated_at__lt=now - STALE_RUNNING)
    )
    rescued = 0
    for job in stale:
        if job.attempts >= MAX_RUNS:
            _finish(job, "gave_up_after_crashes", state=State.FAILED)
            emit("failed", tenant_id=job.tenant_id, count=1, stage="rescue", session_id=job.session_id)
            continue
        with transaction.atomic():
            PromotionJob.objects.filter(id=job.id).update(state=State.PENDING, updated_at=now)
            enqueue_on_commit(PROMOTE_SESSION_TASK, str(job.id))
        rescued += 1
    return rescued
