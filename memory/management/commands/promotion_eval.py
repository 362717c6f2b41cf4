from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError

from loopmem import llm
from loopmem.management.operator import OperatorCommand
from loopmem.models import Tenant
from loopmem.services import tenant_get
from memory.promotion.evaluation import SPLITS, EvalResult, promotion_eval, ratios


class Command(OperatorCommand):
    help = (
        "Score a promotion compiler on a shipped labelled dataset: precision, recall and F1 (per category, with "
        "the injection and empty sessions); never gates promotion. With --tenant, its settings are used and the "
        "day's snapshot is stored."
    )

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", help="tenant id or slug: its LLM settings, and a stored snapshot")
        parser.add_argument(
            "--compiler",
            choices=["tenant", "extractive", "openai"],
            help="default: the tenant's with --tenant, else extractive",
        )
        parser.add_argument("--split", choices=SPLITS, help="a half of dataset v2 (implies --dataset v2)")
        parser.add_argument(
            "--dataset", help="memory/promotion/datasets/dataset_<v>.json; default v1, or v2 with --split"
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"]) if options["tenant"] else None
        compiler = options["compiler"] or ("tenant" if tenant else "extractive")
        split = options["split"]
        dataset = options["dataset"] or ("v2" if split else "v1")
        if compiler == "tenant" and tenant is None:
            raise CommandError("--compiler tenant needs --tenant")
        if split and dataset == "v1":
            raise CommandError("dataset v1 has no splits; --split is for v2")
        _refuse_an_llm_without_a_key(tenant, compiler)
        result = promotion_eval(tenant=tenant, compiler_name=compiler, dataset_version=dataset, split=split)
        return result.as_dict(), _table(result)


def _refuse_an_llm_without_a_key(tenant: Tenant | None, compiler: str) -> None:
    spec = llm.llm_spec_for(tenant)
    provider = spec.provider if compiler == "tenant" else compiler
    if provider == "openai" and not spec.api_key:
        raise CommandError(
            f"the openai compiler has no API key ({'the tenant' if tenant else 'LOOPMEM_LLM_API_KEY'}): there is "
            "nothing to score. Recorded LLM outputs exist only for dataset v1 (replayed by its test); an LLM "
            "compiler is scored against a live LLM."
        )


def _table(result: EvalResult) -> str:
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = [f"{'session':<24} {'tp':>3} {'fp':>3} {'fn':>3}"]
    lines += [f"{s.id:<24} {s.tp:>3} {s.fp:>3} {s.fn:>3}" for s in result.sessions]
    lines.append(f"{'total':<24} {result.true_positives:>3} {result.false_positives:>3} {result.false_negatives:>3}")
    for name, tally in result.by_category().items():
        r = ratios(tally)
        lines.append(f"  {name:<12} precision {pct(r['precision'])}, recall {pct(r['recall'])}, F1 {pct(r['f1'])}")
    for label in ("injection", "empty"):
        outcome = result.nothing_from(label)
        if outcome["sessions"]:
            leaking = f" (leaking: {', '.join(outcome['leaking'])})" if outcome["leaking"] else ""
            lines.append(
                f"{label} sessions yielding nothing: {outcome['yielded_nothing']}/{outcome['sessions']}{leaking}"
            )
    failures = result.compile_failures()
    if failures:
        lines.append(
            "compile failures (scored as nothing emitted): " + ", ".join(f"{k} x{v}" for k, v in failures.items())
        )
    where = f"dataset {result.dataset_version}" + (f", split {result.split}" if result.split else "")
    lines.append(
        f"compiler {result.compiler}, {where}: precision {pct(result.precision)}, recall {pct(result.recall)}, "
        f"F1 {pct(result.f1)}"
    )
    return "\n".join(lines)
