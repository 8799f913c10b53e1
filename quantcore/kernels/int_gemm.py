"""The convolutions' integer matrix product on onnxruntime's MatMulInteger: exact int32 sums, several
times faster than the float BLAS product on a CPU with 8-bit dot-product instructions (VNNI).

    sum_k (x[m, k] + offset) * w[k, n]    x, w int8, offset = input_offset in [-127, 128]
  = sum_k (u[m, k] - zp) * w[k, n]        u = x + 128 as uint8, zp = 128 - offset in [0, 255]

which is MatMulInteger(u, w, a_zero_point=zp): uint8 by int8, the form onnxruntime's MLAS runs on VNNI.
Every term is at most 255 * 128 in magnitude, so a sum over k < BOUND_K terms stays inside int32 and is
exact in any order; a longer one goes to the float product. On a CPU without VNNI, MLAS's uint8 x int8
kernels add pairs of products in int16 with saturation (the reason onnxruntime's quantizer has
`reduce_range`) and the sums would be wrong: the first use therefore runs a probe of such pairs (255
times +-127 and -128, and random values) against numpy's exact sums, and only a machine whose products
all come out exact uses this path. The probe's result holds for the process.

The path is an accelerator like quantcore.kernels.jit's compiled loops and runs where they do
(`jit.enabled()`: evaluate's batches, or FIXPOINT_JIT=all); FIXPOINT_JIT=0 keeps the float product,
and tests/kernels/test_int_gemm.py holds the two to the same integers.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

BOUND_K = (2**31 - 1) // (255 * 128)
"""Terms (k) whose sum cannot leave int32: 65,793."""


def wanted(k: int) -> bool:
    """Whether a product over `k` terms is to run here: the accelerated paths on, k within BOUND_K, and
    this machine's MLAS exact (the probe)."""
    return 0 < k <= BOUND_K and jit.enabled() and _session() is not None


def to_uint8(x: npt.NDArray[np.int8]) -> npt.NDArray[np.uint8]:
    """x + 128 as uint8 (flipping the sign bit of each byte)."""
    return np.bitwise_xor(x.view(np.uint8), np.uint8(0x80))


def zero_point(input_offset: int) -> int | None:
    """The product's zero point for int8 x with `input_offset` added: to_uint8(x) - zero_point is
    x + input_offset (and a padding of zero_point adds nothing); None for an offset outside [-127, 128],
    which no uint8 zero point carries."""
    point = 128 - input_offset
    return point if 0 <= point <= 255 else None


def product(u: npt.NDArray[np.uint8], w: npt.NDArray[np.int8], zero_point: int) -> npt.NDArray[np.int32]:
    """(u - zero_point) @ w, exact: u (M, K) uint8, w (K, N) int8, zero_point in [0, 255]; wanted(K)."""
    session = _session()
    assert session is not None, "product() without wanted()"
    feeds = {
        "u": np.ascontiguousarray(u),
        "w": np.ascontiguousarray(w),
        "zp": np.array(zero_point, dtype=np.uint8),
    }
    result: npt.NDArray[np.int32] = session.run(None, feeds)[0]
    return result


@functools.cache
def _session() -> Any:
    """The one-operator onnxruntime session, or None where onnxruntime is missing or the probe fails."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["u", "w", "zp"], ["y"])],
        "int_gemm",
        [
            helper.make_tensor_value_info("u", TensorProto.UINT8, ["M", "K"]),
            helper.make_tensor_value_info("w", TensorProto.INT8, ["K", "N"]),
            helper.make_tensor_value_info("zp", TensorProto.UINT8, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["M", "N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7  # opset 13's: every onnxruntime this project allows reads it, whatever onnx writes
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # evaluate's int8 kernels run on one core beside the float run
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime raises its own exception types; the float product stays
        return None
    return session if _exact_here(session) else None


def _exact_here(session: Any) -> bool:
    """The probe (module docstring): products that saturate an int16 pair sum, and random ones, against
    numpy's exact sums, over sizes around MLAS's blockings."""
    rng = np.random.default_rng(0)
    for m, k, n in ((1, 1, 1), (7, 64, 9), (33, 257, 17), (64, 1024, 32)):
        cases = [
            (np.full((m, k), 255, np.uint8), np.full((k, n), 127, np.int8), 0),
            (np.full((m, k), 255, np.uint8), np.full((k, n), -128, np.int8), 0),
            (np.zeros((m, k), np.uint8), np.full((k, n), -128, np.int8), 255),
            (
                rng.integers(0, 256, (m, k)).astype(np.uint8),
                rng.integers(-128, 128, (k, n)).astype(np.int8),
                int(rng.integers(0, 256)),
            ),
        ]
        for u, w, zp in cases:
            expected = (u.astype(np.int64) - zp) @ w.astype(np.int64)
            feeds = {"u": u, "w": w, "zp": np.array(zp, dtype=np.uint8)}
            try:
                got = session.run(None, feeds)[0]
            except Exception:  # onnxruntime raises its own exception types
                return False
            if got.dtype != np.int32 or not np.array_equal(got, expected):
                return False
    return True
