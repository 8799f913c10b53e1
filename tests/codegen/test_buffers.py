"""scratch_bytes equals what CMSIS-NN's own *_get_buffer_size functions return, on every core's code path.

tests/codegen/c/buffer_sizes.c is compiled once against the checkout's headers and the host libcmsis-nn.a
(CMSIS-NN v7 compiles the _dsp and _mve variants on every architecture) and run once on every request.
The shapes are seeded random per kernel, biased towards the wrappers' special paths (1x1, 1xN, 3x3,
one input channel, the transpose conv's reverse path). Each request is written from the generator's own
dims, not from buffers.layer_call, so reading the dims off the graph is checked too. A second build
compiles the two sources whose sizes depend on the compiler with Arm Compiler 6's version macro defined,
to check `armclang=True`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore.codegen import buffers
from quantcore.codegen.buffers import BufferSizeError, scratch_bytes
from quantcore.cores import Core, Extension
from quantcore.errors import CmsisNnNotFound
from quantcore.ir import DType, Graph, Node, Op, Tensor
from quantcore.kernels.requantize import Rounding
from quantcore.targets import cmsis_nn
from tests import needs

SOURCE = Path(__file__).resolve().parent / "c" / "buffer_sizes.c"
SEED = 20240611
PER_KIND = 250
PATHS = {Extension.NONE: "none", Extension.DSP: "dsp", Extension.MVE: "mve"}
ARMCLANG_SOURCES = (  # the two files whose sizes read __ARMCC_VERSION
    "Source/ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c",
    "Source/ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s8.c",
)

Quad = tuple[int, int, int, int]


@dataclass(frozen=True)
class Case:
    """One layer: the C program's request fields (from the generator) and the graph that holds it."""

    kind: str
    fields: tuple[int, ...]
    graph: Graph
    node: Node

    def request(self, ext: Extension) -> str:
        return " ".join([self.kind, PATHS[ext], *map(str, self.fields)])


def _case(
    kind: str,
    kernel: str,
    op: Op,
    shapes: tuple[Quad, Quad, Quad],
    weights: tuple[int, ...] | None,
    params: dict[str, Any],
) -> Case:
    """A one-node graph x -> y with constant weights of shape `weights`; `shapes` are the C dims."""
    x, f, y = shapes
    tensors = {"x": Tensor("x", x, DType.INT8), "y": Tensor("y", y, DType.INT8)}
    inputs: tuple[str, ...] = ("x",)
    if weights is not None:
        tensors["w"] = Tensor("w", weights, DType.INT8, np.zeros(weights, np.int8))
        inputs = ("x", "w", "")
    node = Node("layer", op, inputs, ("y",), {"kernel": kernel, "params": params})
    stride, padding, dilation = (params.get(k, d) for k, d in _WINDOW)
    fields = (*x, *f, *y, *stride, *padding, *dilation, params.get("ch_mult", 1))
    return Case(kind, fields, Graph("g", tensors, (node,), ("x",), ("y",)), node)


_WINDOW = (("stride", [1, 1]), ("padding", [0, 0]), ("dilation", [1, 1]))


def _out(size: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    return max(1, (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1)


def _conv(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    c = int(rng.choice([1, 2, 3, 4, 8, 12, 16, 24, 33]))
    groups = int(rng.choice([1, 1, 1, c])) if c in (4, 8, 12) else 1
    kh = 1 if rng.random() < 0.5 else int(rng.integers(1, 6))
    kw = 1 if rng.random() < 0.3 else int(rng.integers(1, 8))
    h = 1 if rng.random() < 0.4 else int(rng.integers(1, 12))  # h == 1: arm_convolve_1_x_n_s8
    w = int(rng.integers(1, 24))
    sh, sw = (int(s) for s in rng.integers(1, 5, 2))
    ph, pw = (0, 0) if rng.random() < 0.4 else (int(rng.integers(0, kh + 1)), int(rng.integers(0, kw + 1)))
    dh, dw = (1, 1) if rng.random() < 0.7 else (int(s) for s in rng.integers(1, 3, 2))
    out_c, n = int(rng.integers(1, 20)), int(rng.integers(1, 3))
    oh, ow = _out(h, kh, sh, ph, dh), _out(w, kw, sw, pw, dw) + int(rng.choice([0, 0, 0, 1, -1, 2, -2]))
    ow = max(ow, 1)  # off now and then: arm_convolve_1_x_n_s8's fallback, C's % of a negative total pad
    params = {"stride": [sh, sw], "padding": [ph, pw], "dilation": [dh, dw]}
    fc = c // groups
    shapes = ((n, h, w, c), (out_c, kh, kw, fc), (n, oh, ow, out_c))
    return _case(kind, kernel, Op.CONV2D, shapes, (out_c, kh, kw, fc), params)


def _conv_1_x_n(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    """Shapes arm_convolve_1_x_n_s8 runs; any padding and output width the C accepts, since its MVE size
    splits the output columns by padding and uses C's % on a total padding that may be negative."""
    c = int(rng.choice([1, 2, 4, 8, 12]))
    kw, w, sw = (
        int(rng.integers(2, 8)),
        int(rng.integers(1, 24)),
        int(rng.choice([s for s in (1, 2, 3, 4) if s * c % 4 == 0])),
    )
    pw, out_c = int(rng.integers(0, kw + 2)), int(rng.integers(1, 9))
    ow = max(1, _out(w, kw, sw, pw) + int(rng.integers(-3, 4)))
    params = {"stride": [1, sw], "padding": [0, pw], "dilation": [int(rng.integers(1, 3)), 1]}
    shapes = ((1, 1, w, c), (out_c, 1, kw, c), (1, 1, ow, out_c))
    return _case(kind, kernel, Op.CONV2D, shapes, (out_c, 1, kw, c), params)


def _depthwise(rng: np.random.Generator, kind: str, kernel: str, max_kernel: int = 6) -> Case:
    c = int(rng.choice([1, 1, 2, 3, 8, 17, 64, 130]))
    mult = 1 if rng.random() < 0.6 else int(rng.integers(1, 12 if c == 1 else 4))
    kh, kw = (3, 3) if rng.random() < 0.4 else (int(k) for k in rng.integers(1, max_kernel, 2))
    h, w = (int(s) for s in rng.integers(1, 16, 2))
    sh, sw = (int(s) for s in rng.integers(1, 3, 2))
    ph, pw = (int(p) for p in rng.integers(0, 3, 2))
    dh, dw = (1, 1) if rng.random() < 0.7 else (int(s) for s in rng.integers(1, 3, 2))
    n = 1 if rng.random() < 0.8 else 2
    out_c = c * mult
    params = {"stride": [sh, sw], "padding": [ph, pw], "dilation": [dh, dw], "ch_mult": mult}
    shapes = ((n, h, w, c), (1, kh, kw, out_c), (n, _out(h, kh, sh, ph, dh), _out(w, kw, sw, pw, dw), out_c))
    return _case(kind, kernel, Op.DEPTHWISE_CONV2D, shapes, (1, kh, kw, out_c), params)


def _fully_connected(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    depth, out_c, n = int(rng.integers(1, 400)), int(rng.integers(1, 60)), int(rng.integers(1, 3))
    case = _case(
        kind,
        kernel,
        Op.FULLY_CONNECTED,
        ((n, 1, 1, depth), (depth, 1, 1, out_c), (n, 1, 1, out_c)),
        (out_c, depth),
        {},
    )
    x, y = Tensor("x", (n, depth), DType.INT8), Tensor("y", (n, out_c), DType.INT8)
    return Case(case.kind, case.fields, case.graph.with_tensors(x, y), case.node)


def _avgpool(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    c, h, w = int(rng.integers(1, 100)), int(rng.integers(1, 20)), int(rng.integers(1, 20))
    kh, kw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
    params = {"kernel": [kh, kw], "stride": [1, 1], "padding": [0, 0]}
    shapes = ((1, h, w, c), (1, kh, kw, 1), (1, h - kh + 1, w - kw + 1, c))
    return _case(kind, kernel, Op.AVG_POOL, shapes, None, params)


def _transpose_conv(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    c = int(rng.choice([1, 4, 16, 17, 32]))  # > 16 with strides <= 2: the reverse-conv path
    kh, kw = (int(k) for k in rng.integers(1, 6, 2))
    sh, sw = (int(s) for s in rng.integers(1, 5, 2))
    h, w, out_c = int(rng.integers(1, 10)), int(rng.integers(1, 10)), int(rng.integers(1, 12))
    oh, ow = (h - 1) * sh + kh, (w - 1) * sw + kw
    params = {"stride": [sh, sw], "padding": [0, 0], "dilation": [1, 1]}
    shapes = ((1, h, w, c), (out_c, kh, kw, c), (1, oh, ow, out_c))
    return _case(kind, kernel, Op.CONV2D, shapes, (out_c, kh, kw, c), params)


def _svdf(rng: np.random.Generator, kind: str, kernel: str) -> Case:
    """An SVDF layer: feature weights (filters, depth) are weights_feature_dims {n = filters, h = depth}."""
    depth, filters, n = int(rng.integers(1, 100)), int(rng.integers(1, 70)), int(rng.integers(1, 3))
    case = _case(
        kind,
        kernel,
        Op.SVDF,
        ((n, 1, 1, depth), (filters, depth, 1, 1), (n, 1, 1, filters)),
        (filters, depth),
        {},
    )
    x, y = Tensor("x", (n, depth), DType.INT8), Tensor("y", (n, filters), DType.INT8)
    return Case(case.kind, case.fields, case.graph.with_tensors(x, y), case.node)


Generator = Callable[[np.random.Generator, str, str], Case]
KINDS: dict[str, tuple[str, Generator]] = {
    "conv_s8": ("arm_convolve_wrapper_s8", _conv),
    "conv_1_x_n_s8": ("arm_convolve_wrapper_s8", _conv_1_x_n),
    "dw_s8": ("arm_depthwise_conv_wrapper_s8", _depthwise),
    "conv_s16": ("arm_convolve_wrapper_s16", _conv),
    "dw_s16": ("arm_depthwise_conv_wrapper_s16", lambda r, k, n: _depthwise(r, k, n, max_kernel=30)),
    "fc_s8": ("arm_fully_connected_s8", _fully_connected),
    "fc_per_channel_s8": ("arm_fully_connected_per_channel_s8", _fully_connected),
    "fc_s16": ("arm_fully_connected_s16", _fully_connected),
    "avgpool_s8": ("arm_avgpool_s8", _avgpool),
    "avgpool_s16": ("arm_avgpool_s16", _avgpool),
    "transpose_conv_s8": ("arm_transpose_conv_wrapper_s8", _transpose_conv),
    "svdf_s8": ("arm_svdf_s8", _svdf),
}
C_KIND = {
    "conv_1_x_n_s8": "conv_s8",
    "fc_per_channel_s8": "fc_s8",
}  # the per-channel FC has no get_buffer_size of its own


def _cases() -> list[Case]:
    rng = np.random.default_rng(SEED)
    cases = []
    for kind, (kernel, make) in KINDS.items():
        for _ in range(PER_KIND):
            case = make(rng, C_KIND.get(kind, kind), kernel)
            cases.append(Case(kind, case.fields, case.graph, case.node))
    return cases


CASES = _cases()


def _requests(cases: list[Case]) -> Iterator[str]:
    for case in cases:
        for ext in Extension:
            yield Case(C_KIND.get(case.kind, case.kind), case.fields, case.graph, case.node).request(ext)
        if case.kind == "transpose_conv_s8":
            yield " ".join(["reverse_conv_s8", "none", *map(str, case.fields)])


# -- building and running the C program -------------------------------------------------------------


@pytest.fixture(scope="module")
def checkout() -> cmsis_nn.CmsisNn:
    try:
        return cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))


def _compile(checkout: cmsis_nn.CmsisNn, exe: Path, extra: list[str]) -> Path:
    library = cmsis_nn.build_host_library(checkout, Rounding.DOUBLE)
    cmsis_nn.run_checked(
        ["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{checkout.include_dir}",
         str(SOURCE), *extra, str(library), "-o", str(exe)],
        f"compiling {SOURCE.name}",
    )  # fmt: skip
    return exe


def _run(exe: Path) -> dict[str, int]:
    requests = list(dict.fromkeys(_requests(CASES)))
    done = subprocess.run([str(exe)], input="\n".join(requests), capture_output=True, text=True, check=True)
    sizes = [int(line) for line in done.stdout.split()]
    assert len(sizes) == len(requests), done.stderr
    return dict(zip(requests, sizes, strict=True))


@pytest.fixture(scope="module")
def c_sizes(checkout: cmsis_nn.CmsisNn, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    needs.require_tool("gcc")
    return _run(_compile(checkout, tmp_path_factory.mktemp("buffers") / "buffer_sizes", []))


@pytest.fixture(scope="module")
def c_sizes_armclang(checkout: cmsis_nn.CmsisNn, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    needs.require_tool("gcc")
    # These objects come before the library on the link line, so its own copies are never pulled in.
    extra = ["-D__ARMCC_VERSION=6010050", *(str(checkout.path / s) for s in ARMCLANG_SOURCES)]
    return _run(_compile(checkout, tmp_path_factory.mktemp("buffers") / "buffer_sizes_armclang", extra))


# -- the comparisons -------------------------------------------------------------------------------


def _c_value(sizes: dict[str, int], case: Case, ext: Extension) -> int:
    return sizes[Case(C_KIND.get(case.kind, case.kind), case.fields, case.graph, case.node).request(ext)]


def _mismatches(sizes: dict[str, int], kind: str, armclang: bool) -> list[str]:
    wrong = []
    for case in (c for c in CASES if c.kind == kind):
        for core in Core:
            ours = scratch_bytes(case.graph, case.node, core, armclang=armclang)
            theirs = _c_value(sizes, case, core.extension)
            if ours != theirs:
                wrong.append(f"{case.request(core.extension)}: ours {ours}, CMSIS-NN {theirs} ({core.label})")
    return wrong


EXACT = [k for k in KINDS if k != "transpose_conv_s8"]


@pytest.mark.cmsis_nn
@pytest.mark.parametrize("kind", EXACT)
def test_scratch_bytes_equal_cmsis_nn_on_every_core(kind: str, c_sizes: dict[str, int]) -> None:
    assert _mismatches(c_sizes, kind, armclang=False) == []


@pytest.mark.cmsis_nn
@pytest.mark.parametrize("kind", ["conv_s8", "dw_s8"])
def test_armclang_sizes_equal_cmsis_nn_built_with_arm_compiler_6_macro(
    kind: str, c_sizes: dict[str, int], c_sizes_armclang: dict[str, int]
) -> None:
    assert _mismatches(c_sizes_armclang, kind, armclang=True) == []
    # and the macro matters: some of these shapes get other sizes than under GCC
    assert any(
        _c_value(c_sizes, c, e) != _c_value(c_sizes_armclang, c, e)
        for c in CASES
        if c.kind == kind
        for e in Extension
    )


def _column_rows_used(case: Case) -> int:
    """The int32 rows arm_transpose_conv_s8.c writes: MAX(kernel_w, stride_w) wide, MAX(kernel_h, stride_h)
    deep (its buf_x_elements and buf_y), independently of buffers.py."""
    (_, _, w, _), (_, kh, kw, _), (_, _, _, out_c) = (case.fields[i : i + 4] for i in (0, 4, 8))
    sh, sw = case.fields[12:14]
    return ((w - 1) * sw + max(kw, sw)) * out_c * max(kh, sh) * 4


@pytest.mark.cmsis_nn
def test_transpose_conv_declared_size_and_its_shortfall(c_sizes: dict[str, int]) -> None:
    short = 0
    for case in (c for c in CASES if c.kind == "transpose_conv_s8"):
        call = buffers.layer_call(case.graph, case.node)
        assert (
            buffers.reverse_conv_bytes(call)
            == c_sizes[" ".join(["reverse_conv_s8", "none", *map(str, case.fields)])]
        )
        for core in Core:
            theirs = _c_value(c_sizes, case, core.extension)
            assert buffers.transpose_conv_s8_declared(call, core.extension) == theirs, case.request(
                core.extension
            )
            ours = scratch_bytes(case.graph, case.node, core)
            if buffers.uses_reverse_conv(call):
                assert ours == theirs
            else:
                assert ours == max(theirs, _column_rows_used(case)), case.request(core.extension)
                short += ours > theirs
    assert short > 0, "no generated shape has stride_w > max(kernel_w, stride_h); widen the generator"


def test_the_random_shapes_reach_every_special_path() -> None:
    calls = [(c.kind, buffers.layer_call(c.graph, c.node)) for c in CASES]
    conv = [call for kind, call in calls if kind == "conv_s8"]
    dw = [call for kind, call in calls if kind == "dw_s8"]
    assert any(buffers.is_convolve_1x1(c) and c.stride == (1, 1) for c in conv)
    assert any(buffers.is_convolve_1x1(c) and c.stride != (1, 1) for c in conv)
    assert any(buffers.is_convolve_1_x_n(c) and c.padding[1] for c in conv)
    assert any(c.filter.c != c.input.c for c in conv)  # grouped
    assert any(c.input.c == 1 and c.output.c > 8 for c in dw)
    assert any(c.input.c == 1 and 1 < c.output.c <= 8 for c in dw)
    assert any((c.filter.h, c.filter.w) == (3, 3) and max(c.padding) <= 1 and c.ch_mult == 1 for c in dw)
    wide = [call for kind, call in calls if kind == "dw_s16"]
    assert any(c.filter.h * c.filter.w >= buffers.FAST_DW_S16_MAX_TAPS for c in wide)


# -- kernels without a buffer, data moves, errors ---------------------------------------------------


@pytest.mark.parametrize(
    "kernel",
    [
        "arm_max_pool_s8",
        "arm_max_pool_s16",
        "arm_softmax_s8",
        "arm_elementwise_add_s8",
        "arm_elementwise_mul_s8",
        "arm_elementwise_add_s16",
        "arm_elementwise_mul_s16",
        "fixpoint_requantize",
    ],
)
def test_kernels_without_scratch_need_none(kernel: str) -> None:
    case = _case("none", kernel, Op.MAX_POOL, ((1, 4, 4, 8), (1, 2, 2, 1), (1, 2, 2, 8)), None, {})
    assert [scratch_bytes(case.graph, case.node, core) for core in Core] == [0] * len(Core)


def test_data_moves_need_no_scratch() -> None:
    case = _case(
        "none", "arm_transpose_s8", Op.TRANSPOSE, ((1, 4, 4, 8), (1, 1, 1, 1), (1, 4, 8, 4)), None, {}
    )
    assert scratch_bytes(case.graph, case.node, Core.CORTEX_M55) == 0


def test_an_unknown_kernel_is_named_with_its_node() -> None:
    case = _case("none", "arm_no_such_kernel_s8", Op.FULLY_CONNECTED, ((1, 1, 1, 4),) * 3, (4, 4), {})
    with pytest.raises(BufferSizeError, match=r"node 'layer' \(fully_connected\).*'arm_no_such_kernel_s8'"):
        scratch_bytes(case.graph, case.node, Core.HOST)
