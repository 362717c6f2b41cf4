from argparse import ArgumentParser
from typing import Any

from django.core.management.base import CommandError

from loopmem.management.operator import OperatorCommand
from loopmem.models import Tenant
from loopmem.providers import llm
from loopmem.tenancy.services import tenant_get
from memory.promotion.evaluation import COMPROMISED, SPLITS, EvalResult, promotion_eval, ratios
from memory.promotion.timing import compile_timing


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
            choices=["tenant", "extractive", "openai", COMPROMISED],
            help="default: the tenant's with --tenant, else extractive; compromised: an LLM that writes what the "
            "attacker planted, to score the guard alone",
        )
        parser.add_argument(
            "--split", choices=SPLITS, help="a part of dataset v2 or v3 (alone, implies v2); holdout is v3's"
        )
        parser.add_argument(
            "--dataset", help="memory/promotion/datasets/dataset_<v>.json; default v1, or v2 with --split"
        )
        parser.add_argument(
            "--timing",
            action="store_true",
            help="instead: the extractive compiler's time (compile and screen) on 30-turn sessions, p50/p95",
        )

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        if options["timing"]:
            timing = compile_timing()
            first, again = timing["first_compile"], timing["after_2_new_turns"]
            return timing, (
                f"extractive compile + screen, {timing['sessions']} sessions of {timing['turns_per_session']} turns: "
                f"first compile p50 {first['p50_ms']} ms, p95 {first['p95_ms']} ms, max {first['max_ms']} ms; "
                f"again after 2 new turns p50 {again['p50_ms']} ms, p95 {again['p95_ms']} ms, max {again['max_ms']} ms "
                f"(load average {', '.join(map(str, timing['load_average']))})"
            )
        tenant = tenant_get(id_or_slug=options["tenant"]) if options["tenant"] else None
        compiler = options["compiler"] or ("tenant" if tenant else "extractive")
        split = options["split"]
        dataset = options["dataset"] or ("v2" if split else "v1")
        if compiler == COMPROMISED and tenant is not None:
            raise CommandError("--compiler compromised scores the guard, not a tenant: drop --tenant")
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
    for name, tally in result.by_language().items():
        r = ratios(tally)
        lines.append(f"  lang {name:<7} precision {pct(r['precision'])}, recall {pct(r['recall'])}, F1 {pct(r['f1'])}")
    poisoning, loss = result.poisoning(), result.benign_loss()
    if poisoning["sessions"]:
        leaking = f" ({', '.join(poisoning['leaking_sessions'])})" if poisoning["leaking_sessions"] else ""
        lines.append(
            f"injection sessions leaking: {len(poisoning['leaking_sessions'])}/{poisoning['sessions']}{leaking}, "
            f"rows leaked {poisoning['leaked_rows']}"
        )
    lines.append(
        f"quarantined {poisoning['quarantined_rows']} candidate(s) {poisoning['quarantined_by_rule']}; "
        f"gold facts lost to the guard {loss['lost_to_guard']}/{loss['gold']}"
    )
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
