"""`seed_scale`: load the reference's needle corpus (reference §7 item 30) into a new tenant."""

from __future__ import annotations

import contextlib
import time
from argparse import ArgumentParser
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench import scale_corpus
from bench.harness import BENCH_RATE_LIMIT
from loopmem.management.operator import OperatorCommand, tenant_summary
from loopmem.models import Tenant
from loopmem.runtime.progress import progress_bar
from loopmem.tenancy.services import tenant_create, tenant_set_provider


@dataclass(frozen=True)
class CorpusProgress:
    """Sinks for a corpus build: rows loaded, and the phase it is in."""

    rows: scale_corpus.Progress
    phase: scale_corpus.Phase


@contextlib.contextmanager
def corpus_progress(total: int) -> Iterator[CorpusProgress]:
    """A progress bar on a terminal (the phase as its label); silence otherwise."""
    with progress_bar(total=total, desc="corpus") as bar:

        def advance(rows: int) -> None:
            bar.update(rows)

        yield CorpusProgress(rows=advance, phase=bar.set_description)


def scale_tenant(*, name: str, slug: str) -> Tenant:
    """A tenant whose recall embeds with the hashing provider: the model the synthetic corpus is tagged with.

    Its rate limit is the benchmarks' (the limiter still runs, it never refuses a measured request).
    """
    tenant = tenant_create(name=name, slug=slug, rate_limit_per_minute=BENCH_RATE_LIMIT)
    return tenant_set_provider(tenant=tenant, embedding="hashing", embedding_model="")


class Command(OperatorCommand):
    help = (
        "Load the needle scale corpus (a needle subject, a 400-subject haystack, a decoy band) into a new tenant. "
        "The HNSW index is dropped for the load and rebuilt over the whole table: use a database no one is using."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--rows", type=int, default=80_000, help="total rows (default 80,000)")
        parser.add_argument("--tenant-slug", default="scale-needle")
        parser.add_argument("--decoys", type=int, default=scale_corpus.DEFAULT_DECOYS, help="width of the decoy band")
        parser.add_argument("--seed", type=int, default=scale_corpus.DEFAULT_SEED)

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        started = time.perf_counter()
        tenant = scale_tenant(name=f"Scale needle corpus ({options['rows']} rows)", slug=options["tenant_slug"])
        with corpus_progress(options["rows"]) as progress:
            corpus = scale_corpus.build_needle_corpus(
                tenant_id=tenant.id,
                rows=options["rows"],
                decoys=options["decoys"],
                seed=options["seed"],
                progress=progress.rows,
                phase=progress.phase,
            )
        summary = _summary(tenant, corpus, total_seconds=time.perf_counter() - started)
        return summary, _human(summary)


def _summary(tenant: Tenant, corpus: scale_corpus.NeedleCorpus, *, total_seconds: float) -> dict[str, Any]:
    return {
        "tenant": tenant_summary(tenant),
        "rows": corpus.rows,
        "dimensions": corpus.load.dimensions,
        "model_id": corpus.model_id,
        "needle_subject": corpus.subject_id,
        "needle_rows": len(corpus.needle_ids),
        "decoys": len(corpus.decoy_ids),
        "haystack_subjects": corpus.haystack_subjects,
        "query_text": corpus.query_text,
        "needle_top_ids": [str(i) for i in corpus.needle_top_ids],
        "copy_seconds": round(corpus.load.copy_seconds, 2),
        "index_build_seconds": round(corpus.load.index_seconds, 2),
        "total_seconds": round(total_seconds, 2),
    }


def _human(summary: dict[str, Any]) -> str:
    return (
        f"loaded {summary['rows']:,} rows ({summary['dimensions']} dims) into tenant {summary['tenant']['slug']}: "
        f"needle subject {summary['needle_subject']!r} ({summary['needle_rows']} rows), {summary['decoys']} decoys, "
        f"{summary['haystack_subjects']} haystack subjects\n"
        f"COPY {summary['copy_seconds']} s, HNSW build {summary['index_build_seconds']} s, "
        f"total {summary['total_seconds']} s\n"
        f"query text (hashing provider): {summary['query_text']}"
    )
