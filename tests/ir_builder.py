"""A small builder of float NCHW IR graphs for tests, shaped like the importers' output."""

from __future__ import annotations

import numpy as np

from quantcore.ir import Graph, Node, Op, Tensor


class GraphBuilder:
    def __init__(self, input_shape: tuple[int, ...], seed: int = 0, name: str = "g") -> None:
        self.rng = np.random.default_rng(seed)
        self.name = name
        self.tensors: dict[str, Tensor] = {"input": Tensor("input", input_shape)}
        self.nodes: list[Node] = []
        self.current = "input"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensors[self.current].shape

    def const(self, name: str, data: np.ndarray) -> str:
        self.tensors[name] = Tensor(name, data.shape, data=data.astype(np.float32))
        return name

    def _emit(
        self, op: Op, inputs: tuple[str, ...], out_shape: tuple[int, ...], **attrs: object
    ) -> GraphBuilder:
        name = f"{op.json_name}{len(self.nodes)}"
        out = f"{name}.out"
        self.tensors[out] = Tensor(out, out_shape)
        self.nodes.append(Node(name, op, inputs, (out,), attrs))
        self.current = out
        return self

    def conv(
        self,
        out_ch: int,
        k: int = 3,
        stride: int = 1,
        pad: int = 0,
        groups: int = 1,
        dilation: int = 1,
        bias: bool = True,
        pads: tuple[int, int, int, int] | None = None,
    ) -> GraphBuilder:
        n, c, h, w = self.shape
        name = f"conv{len(self.nodes)}"
        weight = self.const(f"{name}.w", self.rng.normal(0, 0.5, (out_ch, c // groups, k, k)))
        b = self.const(f"{name}.b", self.rng.normal(0, 0.1, out_ch)) if bias else ""
        pads = pads or (pad, pad, pad, pad)
        oh = (h + pads[0] + pads[2] - dilation * (k - 1) - 1) // stride + 1
        ow = (w + pads[1] + pads[3] - dilation * (k - 1) - 1) // stride + 1
        return self._emit(
            Op.CONV2D,
            (self.current, weight, b),
            (n, out_ch, oh, ow),
            strides=(stride, stride),
            pads=pads,
            dilations=(dilation, dilation),
            groups=groups,
        )

    def bn(self) -> GraphBuilder:
        c = self.shape[1]
        base = f"bn{len(self.nodes)}"
        ins = (
            self.current,
            self.const(f"{base}.g", self.rng.uniform(0.5, 1.5, c)),
            self.const(f"{base}.b", self.rng.normal(0, 0.2, c)),
            self.const(f"{base}.m", self.rng.normal(0, 0.2, c)),
            self.const(f"{base}.v", self.rng.uniform(0.5, 2.0, c)),
        )
        return self._emit(Op.BATCH_NORM, ins, self.shape, epsilon=1e-5)

    def relu(self) -> GraphBuilder:
        return self._emit(Op.RELU, (self.current,), self.shape)

    def clip(self, lo: float | None, hi: float | None) -> GraphBuilder:
        return self._emit(Op.CLIP, (self.current,), self.shape, min=lo, max=hi)

    def pool(self, op: Op, k: int, stride: int, pad: int = 0) -> GraphBuilder:
        n, c, h, w = self.shape
        oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        return self._emit(
            op,
            (self.current,),
            (n, c, oh, ow),
            kernel=(k, k),
            strides=(stride, stride),
            pads=(pad,) * 4,
            count_include_pad=False,
        )

    def gap(self) -> GraphBuilder:
        n, c, _, _ = self.shape
        return self._emit(Op.GLOBAL_AVG_POOL, (self.current,), (n, c, 1, 1))

    def flatten(self) -> GraphBuilder:
        n = self.shape[0]
        flat = (n, int(np.prod(self.shape[1:])))
        return self._emit(Op.RESHAPE, (self.current,), flat, shape=flat)

    def fc(self, out: int, bias: bool = True) -> GraphBuilder:
        n, k = self.shape
        name = f"fc{len(self.nodes)}"
        w = self.const(f"{name}.w", self.rng.normal(0, 0.3, (out, k)))
        b = self.const(f"{name}.b", self.rng.normal(0, 0.1, out)) if bias else ""
        return self._emit(Op.FULLY_CONNECTED, (self.current, w, b), (n, out))

    def add(self, other: str) -> GraphBuilder:
        return self._emit(Op.ADD, (self.current, other), self.shape)

    def softmax(self) -> GraphBuilder:
        return self._emit(Op.SOFTMAX, (self.current,), self.shape, axis=len(self.shape) - 1)

    def build(self) -> Graph:
        return Graph(self.name, dict(self.tensors), tuple(self.nodes), ("input",), (self.current,)).verify()
