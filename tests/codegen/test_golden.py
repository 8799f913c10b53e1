"""The generated C for a small model with every layer kind, compared byte for byte with golden files.

The golden files are the review copy of what the generator writes: a change to a template or to the
lowering shows up here as a diff to read. After an intended change, rewrite them with
`pytest tests/codegen/test_golden.py --update-golden` and review the diff like code.

The input is fixed: residual_cnn()'s ONNX (seeded weights, built in memory) and a quant-params JSON
kept beside the golden files, so no calibration (floating point in onnxruntime) runs here.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from quantcore import pipeline
from quantcore.codegen.generate import Sources, generate
from quantcore.cores import Core
from quantcore.quantize import params_json
from quantcore.quantize.document import from_document
from tests.onnx_models import residual_cnn

GOLDEN = Path(__file__).resolve().parent / "golden" / "residual"
PARAMS = GOLDEN / "residual.params.json"
FILES = ("model.h", "model.c", "model_data.c")


def _write_params(model: Path) -> None:
    """Quantize once (only when the JSON is missing): the JSON is an input of this test, not an output."""
    import numpy as np

    from quantcore.data import DataSet

    loaded = pipeline.load_model(model)
    x = np.random.default_rng(0).normal(size=(32, 1, 12, 12)).astype(np.float32)
    params_json.write(PARAMS, pipeline.quantize(loaded, DataSet(x)).document)


def test_the_generated_sources_equal_the_golden_files(tmp_path: Path, update_golden: bool) -> None:
    model = tmp_path / "residual.onnx"
    onnx.save(residual_cnn(), model)
    if not PARAMS.is_file():
        if not update_golden:
            pytest.fail(f"{PARAMS} is missing: create it with --update-golden")
        _write_params(model)
    loaded = pipeline.load_model(model)
    qgraph = from_document(loaded.graph, params_json.load(PARAMS))
    out = GOLDEN if update_golden else tmp_path / "out"
    generate(qgraph, out, core=Core.CORTEX_M4, sources=Sources(PARAMS, model), force=update_golden)
    if update_golden:
        return
    for name in FILES:
        assert (out / name).read_text() == (GOLDEN / name).read_text(), (
            f"{name} differs from {GOLDEN / name}: if the change is intended, rerun with --update-golden"
        )
