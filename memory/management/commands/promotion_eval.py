from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.services import tenant_get
from memory.promotion.evaluation import promotion_eval


class Command(OperatorCommand):
    help = "Score the promotion compiler on the shipped labelled dataset (precision/recall); never gates promotion."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug (its LLM settings are used)")
        parser.add_argument("--compiler", choices=["tenant", "extractive", "openai"], default="tenant")
        parser.add_argument("--dataset", default="v1", help="memory/promotion/datasets/dataset_<v>.json")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        result = promotion_eval(tenant=tenant, compiler_name=options["compiler"], dataset_version=options["dataset"])
        summary = result.as_dict()

        def pct(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.2f}"

        lines = [f"{'session':<24} {'tp':>3} {'fp':>3} {'fn':>3}"]
        lines += [f"{s.id:<24} {s.tp:>3} {s.fp:>3} {s.fn:>3}" for s in result.sessions]
        lines.append(
            f"{'total':<24} {result.true_positives:>3} {result.false_positives:>3} {result.false_negatives:>3}"
        )
        lines.append(
            f"compiler {result.compiler}, dataset {result.dataset_version}: "
            f"precision {pct(result.precision)}, recall {pct(result.recall)}"
        )
        return summary, "\n".join(lines)
