"""Self-test of the float kernels on the forms the benchmark's networks do not reach.

    python bench/float_model/selftest.py [--targets host qemu-m4 ...]

One synthetic float graph: a grouped, dilated, strided conv with asymmetric pads, no bias and a CLIP; a
depthwise conv with channel multiplier 2; an average pool with count_include_pad and ceil_mode padding;
a padded max pool with a fused ReLU; standalone RELU and CLIP; MUL by a per-channel constant given
first; GLOBAL_AVG_POOL; ADD broadcasting a (1, 1, 1, C) activation and one materialising a (1, H, 1, 1)
constant; PAD on H and C; CONCAT with a constant along W; SOFTMAX over a 4-D tensor; Reshape, a fully
connected layer without bias, Identity. The graph cut after every node runs too (on the first target),
so no layer's error hides behind a later one. Each run: 3 seeded inputs, the firmware's output against
float_exec within build.TOLERANCE, every source compiled with -Werror. Exit status 1 if any fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: quantcore, bench

from bench.float_model.build import (
    build_float_firmware,
    check_outputs,
    reference_outputs,
    run_float_firmware,
)
from bench.float_model.generate import generate_float, unsupported
from quantcore.ir import Activation, DType, Graph, Layout, Node, Op, Tensor
from quantcore.targets.target import BUILTIN


def _act(name: str, shape: tuple[int, ...]) -> Tensor:
    return Tensor(name, shape, DType.FLOAT32, layout=Layout.NHWC if len(shape) == 4 else None)


def synthetic_graph(seed: int = 1) -> Graph:
    rng = np.random.default_rng(seed)
    tensors: list[Tensor] = [_act("x", (1, 9, 8, 4))]
    nodes: list[Node] = []

    def const(name: str, shape: tuple[int, ...]) -> str:
        tensors.append(Tensor(name, shape, DType.FLOAT32, data=rng.normal(size=shape).astype(np.float32)))
        return name

    def node(name: str, op: Op, inputs: tuple[str, ...], out: tuple[int, ...], **attrs: object) -> None:
        tensors.append(_act(name, out))
        nodes.append(Node(name, op, inputs, (name,), attrs))

    node(
        "conv_g", Op.CONV2D, ("x", const("w1", (6, 3, 2, 2)), ""), (1, 4, 4, 6),
        strides=(2, 2), pads=(1, 0, 2, 1), dilations=(2, 1), groups=2,
        activation=Activation.CLIP, clip=(-0.5, 1.5),
    )  # fmt: skip
    node(
        "dw_m2", Op.DEPTHWISE_CONV2D, ("conv_g", const("wd", (1, 3, 3, 12)), const("bd", (12,))),
        (1, 4, 4, 12), strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), kernel=(3, 3),
        activation=Activation.NONE,
    )  # fmt: skip
    node(
        "avg_inc", Op.AVG_POOL, ("dw_m2",), (1, 3, 3, 12),
        kernel=(3, 3), strides=(2, 2), pads=(1, 1, 2, 2), ceil_pads=(1, 1), count_include_pad=True,
    )  # fmt: skip
    node(
        "max_pad", Op.MAX_POOL, ("avg_inc",), (1, 2, 2, 12),
        kernel=(2, 2), strides=(2, 2), pads=(0, 0, 1, 1), ceil_pads=(1, 1), activation=Activation.RELU,
    )  # fmt: skip
    node("relu", Op.RELU, ("max_pad",), (1, 2, 2, 12))
    node("mul_c", Op.MUL, (const("scale", (1, 1, 1, 12)), "relu"), (1, 2, 2, 12), activation=Activation.NONE)
    node("gap", Op.GLOBAL_AVG_POOL, ("mul_c",), (1, 1, 1, 12))
    node("add_b", Op.ADD, ("mul_c", "gap"), (1, 2, 2, 12), activation=Activation.RELU6)
    node("add_m", Op.ADD, ("add_b", const("rows", (1, 2, 1, 1))), (1, 2, 2, 12), activation=Activation.NONE)
    node("clip", Op.CLIP, ("add_m",), (1, 2, 2, 12), min=-0.25, max=None)
    node("pad", Op.PAD, ("clip",), (1, 3, 2, 14), pads=(0, 1, 0, 1, 0, 0, 0, 1), value=0.5)
    node("cat", Op.CONCAT, ("pad", const("block", (1, 3, 1, 14))), (1, 3, 3, 14), axis=2)
    node("softmax", Op.SOFTMAX, ("cat",), (1, 3, 3, 14), axis=3)
    node("flat", Op.RESHAPE, ("softmax",), (1, 126), shape=(1, 126))
    node("fc", Op.FULLY_CONNECTED, ("flat", const("wf", (5, 126)), ""), (1, 5), activation=Activation.NONE)
    node("y", Op.IDENTITY, ("fc",), (1, 5))
    return Graph("synthetic", {t.name: t for t in tensors}, tuple(nodes), ("x",), ("y",)).verify()


def run_one(graph: Graph, target: str, x: np.ndarray, work: Path) -> tuple[float, bool]:
    why = unsupported(graph)
    if why is not None:
        raise SystemExit(f"selftest: the float kernels refuse the graph: {why}")
    model = generate_float(graph, work / "model")
    firmware = build_float_firmware(
        model, BUILTIN[target], x, work / "build", name=graph.name, extra_cflags=("-Werror",)
    )
    check = check_outputs(run_float_firmware(firmware, model), reference_outputs(graph, x))
    return check.relative, check.passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=["host", "qemu-m4"], choices=sorted(BUILTIN))
    args = parser.parse_args()
    graph = synthetic_graph()
    x = np.random.default_rng(0).normal(size=(3, 9, 8, 4)).astype(np.float32)
    failed = []
    with tempfile.TemporaryDirectory(prefix="fixpoint-float-selftest-") as tmp:
        for target in args.targets:
            error, passed = run_one(graph, target, x, Path(tmp) / target)
            print(f"{target}: whole graph, max error/range {error:.2e} {'PASS' if passed else 'FAIL'}")
            failed += [] if passed else [target]
        for k, cut in enumerate(graph.nodes, 1):
            sub = graph.evolve(nodes=graph.nodes[:k], outputs=(cut.outputs[0],)).prune()
            error, passed = run_one(sub, args.targets[0], x, Path(tmp) / f"cut{k}")
            verdict = "ok" if passed else "FAIL"
            print(f"  {args.targets[0]} after {cut.name:8} {cut.op.json_name:16} {error:.2e} {verdict}")
            failed += [] if passed else [cut.name]
    print("selftest: " + (f"FAILED: {', '.join(failed)}" if failed else "every run within tolerance"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
