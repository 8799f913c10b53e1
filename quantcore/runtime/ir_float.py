"""Float activations of a model that onnxruntime cannot run (a .tflite), from the IR float executor.

Calibration, evaluation and the automatic choices read a float model through one call,
`activations(feeds, layout)`; OnnxFloat answers it with onnxruntime, this class with
quantcore/runtime/float_exec.py on the prepared IR graph itself. The IR of such a model is already in
the model's own layout (NHWC), so `layout` changes nothing. Values are float32, as onnxruntime's are.
"""

from __future__ import annotations

import numpy as np

from quantcore.ir import Graph
from quantcore.runtime import float_exec


class IrFloat:
    """The float model of an imported graph, run by the IR float executor."""

    ir_layout = True
    """activations() gives the IR's layout whatever `layout` asks (calibrate reads channel axes by it)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def load(self) -> None:
        """Nothing to load (the same call as OnnxFloat.load)."""

    def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]:
        """Every IR activation for one batch of model inputs (in the model's layout, which is the IR's)."""
        env = float_exec.run(self.graph, feeds)
        return {t.name: env[t.name].astype(np.float32) for t in self.graph.activations()}
