"""bench_local_embedder: the local MiniLM embedder's throughput, in calls of the embedding pipeline's batch size."""

from __future__ import annotations

import os
import random
import time
from argparse import ArgumentParser
from typing import Any

from loopmem.embedding import pipeline
from loopmem.embedding.embedders import _minilm, minilm_int8_arithmetic
from loopmem.management.operator import OperatorCommand
from memory.promotion.evaluation import labelled_sessions

MODELS = {"stored": _minilm, "int8-arithmetic": minilm_int8_arithmetic}


class Command(OperatorCommand):
    help = (
        "Embed texts with the local MiniLM embedder in calls of the embedding pipeline's batch size, as the worker "
        "does: conversation turns of the promotion datasets (mixed lengths) and short one-line facts. Prints texts/s "
        "for each and the load average; run it on a quiet machine."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--texts", type=int, default=320, help="texts of each kind")
        parser.add_argument("--seed", type=int, default=5)
        parser.add_argument(
            "--model",
            choices=MODELS,
            default="stored",
            help="stored: the model every stored vector and query uses; int8-arithmetic: the distiller's",
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        count = options["texts"]
        turns = [
            turn.content
            for version in ("v2", "v3")
            for session in labelled_sessions(version)
            for turn in session.turns
            if turn.role in ("user", "assistant")
        ]
        random.Random(options["seed"]).shuffle(turns)
        kinds = {
            "conversation turns": turns[:count],
            "short facts": [f"Our primary region is eu-west-1 and we deploy on Fridays ({n})." for n in range(count)],
        }
        embedder = MODELS[options["model"]]()
        embedder.embed(["warm-up"])  # loads the model
        load_before = _load()
        figures = {kind: _throughput(embedder, texts) for kind, texts in kinds.items()}
        summary = {
            "texts": count,
            "model": options["model"],
            "call_size": pipeline.BATCH_SIZE,
            "kinds": figures,
            "load_average_before": load_before,
            "load_average_after": _load(),
        }
        return summary, render(summary)


def _throughput(embedder: Any, texts: list[str]) -> dict[str, float]:
    characters = sorted(len(text) for text in texts)
    started = time.perf_counter()
    for start in range(0, len(texts), pipeline.BATCH_SIZE):
        embedder.embed(texts[start : start + pipeline.BATCH_SIZE])
    elapsed = time.perf_counter() - started
    return {
        "texts_per_second": round(len(texts) / elapsed, 1),
        "characters_p50": characters[len(characters) // 2] if characters else 0,
        "characters_max": characters[-1] if characters else 0,
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def render(summary: dict[str, Any]) -> str:
    lines = [
        f"local MiniLM ({summary['model']}), {summary['texts']} texts of each kind in calls of "
        f"{summary['call_size']}; load average before {summary['load_average_before']}, after "
        f"{summary['load_average_after']}",
        f"{'texts':<22}{'texts/s':>9}{'chars p50':>11}{'chars max':>11}",
    ]
    for kind, f in summary["kinds"].items():
        lines.append(f"{kind:<22}{f['texts_per_second']:>9.1f}{f['characters_p50']:>11}{f['characters_max']:>11}")
    return "\n".join(lines)
