"""A firmware tree for the server's end-to-end tests: the residual model, its quant-params JSON, the
sources `fixpoint generate` writes from them, a fixpoint.toml and a main.c that calls the model."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx

from tests.onnx_models import residual_cnn

GOLDEN_PARAMS = (
    Path(__file__).resolve().parents[1] / "codegen" / "golden" / "residual" / "residual.params.json"
)

TOML = """\
model = "model/residual.onnx"
params = "model/residual.params.json"
generated = "src/model"
target = "qemu-m4"
"""

MAIN_C = """\
#include "model.h"

int main(void)
{
    if (model_init() != 0) {
        return 1;
    }
    return model_invoke();
}
"""


def make_tree(root: Path) -> Path:
    """Write the tree into `root` (created) and generate the model sources; returns `root`."""
    from quantcore import pipeline
    from quantcore.codegen import Sources, generate
    from quantcore.quantize import params_json
    from quantcore.quantize.document import from_document

    (root / "model").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    model = root / "model" / "residual.onnx"
    params = root / "model" / "residual.params.json"
    onnx.save(residual_cnn(), model)
    shutil.copyfile(GOLDEN_PARAMS, params)
    (root / "fixpoint.toml").write_text(TOML)
    (root / "src" / "main.c").write_text(MAIN_C)
    loaded = pipeline.load_model(model)
    qgraph = from_document(loaded.graph, params_json.load(params))
    generate(qgraph, root / "src" / "model", sources=Sources(params, model))
    return root
