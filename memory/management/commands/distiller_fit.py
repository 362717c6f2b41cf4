"""`manage.py distiller_fit [--cv]`: refit the offline distiller on dataset v2's dev half, or cross-validate it."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from memory.promotion.distiller import MODEL_PATH, default_embedder
from memory.promotion.distiller_fit import cross_validate, refit


class Command(OperatorCommand):
    help = (
        "Refit memory/promotion/distiller_model.json on dataset v2's dev split (never on test), or with --cv "
        "estimate it by leave-one-session-out on dev and write nothing. A developer's tool, not an operator's."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--cv", action="store_true", help="leave-one-session-out on dev; writes nothing")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        embedder = default_embedder()
        if options["cv"]:
            tally = cross_validate(embedder=embedder)
            return {"dev_leave_one_session_out": tally.as_dict()}, f"dev, leave one session out: {tally.as_dict()}"
        model = refit(embedder=embedder)
        summary: dict[str, Any] = {
            "wrote": MODEL_PATH.name,
            "candidates": model["candidates"],
            "positives": model["positives"],
        }
        return summary, f"wrote {MODEL_PATH.name}: {model['candidates']} dev candidates, {model['positives']} positive"
