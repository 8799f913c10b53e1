"""Every TFLM example model: imported or refused (and why), its operators, import time, and the bytes
Fixpoint's int8 reference executor writes differently from TFLM's interpreter on random int8 inputs.

    .venv/bin/python bench/tflm_models.py [CASES]      (FIXPOINT_TFLM_REPO names the checkout)
"""

from __future__ import annotations

import collections
import sys
import time

import numpy as np

from quantcore import pipeline
from quantcore.errors import QuantcoreError
from quantcore.importers._tflite_read import read_model
from quantcore.runtime import int8_exec
from tests import tflm


def mismatched(path: object, result: pipeline.QuantizeResult, cases: int) -> int:
    interpreter = tflm.interpreter(path)  # type: ignore[arg-type]
    qgraph, rng, bad = result.qgraph, np.random.default_rng(0), 0
    for _ in range(cases):
        x = rng.integers(-128, 128, size=interpreter.get_input_details(0)["shape"], dtype=np.int8)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        theirs = interpreter.get_output(0)
        ours = int8_exec.run(qgraph, {qgraph.inputs[0]: x})[qgraph.outputs[0]]
        bad += int(np.count_nonzero(ours.reshape(theirs.shape) != theirs))
    return bad


def main(cases: int) -> None:
    for name in tflm.MODELS:
        path = tflm.model_path(name)
        if path is None:
            print(f"{name}: not in the checkout")
            continue
        ops = collections.Counter(op.op for op in read_model(path.read_bytes(), str(path)).operators)
        started = time.perf_counter()
        try:
            model = pipeline.load_model(path)
        except QuantcoreError as error:
            print(f"{name}: refused ({error})\n  ops {dict(ops)}")
            continue
        seconds = time.perf_counter() - started
        verdict = "float (quantize with --calib)"
        if model.fully_quantized:
            verdict = f"{mismatched(path, pipeline.quantize_imported(model), cases)} mismatched bytes vs TFLM"
        print(f"{name}: imported in {seconds:.2f} s; {verdict}\n  ops {dict(ops)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
