"""A firmware tree for the server's end-to-end tests: the residual model, its quant-params JSON, the
sources `fixpoint generate` writes from them, a fixpoint.toml and a main.c that calls the model."""

from __future__ import annotations

from pathlib import Path

from tests.server.fixtures import generated_project

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
    generated_project(root, model_dir=root / "model", generated=root / "src" / "model")
    (root / "fixpoint.toml").write_text(TOML)
    (root / "src" / "main.c").write_text(MAIN_C)
    return root
