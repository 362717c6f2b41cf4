from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from knowledge.embedding import ARTICLE_EMBEDDINGS
from loopmem.embedding.pipeline import sweep
from loopmem.management.operator import OperatorCommand
from memory.embedding import MEMORY_EMBEDDINGS
from memory.graduation import memory_graduation_sweep
from memory.promotion.jobs import promotion_sweep
from memory.session_tier import session_prune

SWEEPS = ("embedding", "prune", "promotion", "graduation")


class Command(OperatorCommand):
    help = "Run a periodic sweep now, in this process (the beat schedule runs the same code)."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("sweep", choices=SWEEPS)
        parser.add_argument("--max-per-run", type=int, help="graduation: at most this many memories")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        if options["sweep"] == "graduation":
            tally = memory_graduation_sweep(max_per_run=options["max_per_run"])
            return {"sweep": "graduation", **tally}, (
                f"graduation sweep: {tally['graduated']} of {tally['candidates']} candidate(s) graduated "
                f"({tally['created']} created, {tally['duplicate'] + tally['deduplicated']} duplicate, "
                f"{tally['skipped_low_novelty']} low novelty, {tally['gate_unavailable']} gate unavailable, "
                f"{tally['secret_detected']} holding a secret, "
                f"{tally['structural_error'] + tally['error']} failed)"
            )
        if options["sweep"] == "promotion":
            swept = promotion_sweep()
            summary = {"sweep": "promotion", **asdict(swept)}
            return summary, (
                f"promotion sweep: {swept.enqueued} enqueued of {swept.sessions} candidate session(s); "
                f"{swept.already_in_flight} already in flight, {swept.over_budget} over budget, "
                f"{swept.rescued} stale job(s) re-enqueued"
            )
        if options["sweep"] == "prune":
            deleted = session_prune()
            return {"sweep": "prune", "deleted": deleted}, f"session prune: {deleted} expired turn(s) deleted"
        memories, articles = sweep(MEMORY_EMBEDDINGS), sweep(ARTICLE_EMBEDDINGS)
        summary = {"sweep": "embedding", **memories.as_dict(), "articles": articles.as_dict()}
        return summary, f"{memories.summary('embedding sweep')}; {articles.summary('articles')}"
