"""recall_eval: evidence recall@k and all-evidence-hit@k of memory recall per mode and question kind, on the team's
conversational dataset (its dev split, its test split or all of it).

A quality evaluation: it loads every conversation into a scratch tenant (the local MiniLM embedder, whatever the
deployment's default), asks the chosen split's questions in each mode, prints the figures and deletes the
tenant. See bench/recall_eval.py for what is measured and docs/quality.md for the figures.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from bench import recall_eval
from loopmem.management.operator import OperatorCommand
from loopmem.runtime.progress import progress_bar


class Command(OperatorCommand):
    help = (
        "Evaluate memory recall on the conversational dataset: evidence recall@k and all-evidence-hit@k per "
        "question kind and mode, and the answer_confidence table, on the dev, test or all questions, in a scratch "
        "tenant deleted afterwards."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--mode", default="semantic,keyword,hybrid,deep", help="comma-separated recall modes")
        parser.add_argument("--k", default="5,10,20", help="comma-separated cut-offs (1..100)")
        parser.add_argument("--dataset", type=Path, default=recall_eval.DATASET, help="a dataset of the same shape")
        parser.add_argument(
            "--split",
            default=recall_eval.ALL_SPLITS,
            help="ask the questions of one split: dev (to tune on), test (to report) or all (the default)",
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        try:
            modes = recall_eval.parse_modes(options["mode"])
            ks = recall_eval.parse_ks(options["k"])
            split = recall_eval.parse_split(options["split"])
            dataset = recall_eval.load_dataset(options["dataset"])
            asked = len(recall_eval.select_questions(dataset, split))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not asked:
            raise CommandError(f"no question in split {split}")
        turns = sum(len(s["turns"]) for c in dataset["conversations"] for s in c["sessions"])
        with recall_eval.scratch_tenant() as tenant:
            with progress_bar(total=turns, desc="embed memories") as bar:
                corpus = recall_eval.load_corpus(dataset, tenant=tenant, split=split, progress=bar.update)
            with progress_bar(total=asked, desc="ask") as bar:
                scores = recall_eval.evaluate(corpus, modes=modes, ks=ks, progress=bar.update)
            result = recall_eval.summary(corpus, scores, ks=ks, dataset_version=dataset["version"], split=split)
        return result, recall_eval.render(result)
