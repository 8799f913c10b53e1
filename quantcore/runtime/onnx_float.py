"""Float activations from the original model through onnxruntime, in the IR's layout and names.

Calibration and evaluation read the float value of every IR activation tensor (through a batch-first
ONNX LSTM too, which onnxruntime's CPU kernel refuses: it runs as the same layer sequence-first). The
importer keeps ONNX tensor names and the passes keep the name of the last tensor they fuse, so most IR
activations exist in the ONNX model under the same name; onnxruntime is asked for them as extra
outputs. 4-D tensors are transposed from ONNX's NCHW to the IR's NHWC (io_layout.to_firmware: not an
input or output the model file gives as NHWC already). Tensors the passes created (layout transposes)
are computed by the IR float executor from their inputs.

The model comes as bytes, the ones the importer read and checked (quantcore.pipeline.load_model):
onnxruntime never opens the model file, or a file the model names, itself. Its graph optimizations are
off: every tensor stays observable, no constant subgraph is computed at session creation (the importer's
folding budget already refused any that would be too large), and two exports of one network that the
importer reads as the same graph give the same quantization to the bit (tests/importers/
test_exporters.py) - an optimizer would fuse their differently written nodes differently.

`evaluate` runs the float reference over thousands of samples: its session (`for_evaluation`) runs the
optimizations (ORT_ENABLE_ALL: operator fusion and the blocked NCHWc convolution layout, 1.5-2.2x faster
on the benchmark nets) except constant folding (UNSAFE_OPTIMIZERS). The tensors asked for stay
observable: onnxruntime never fuses away a node whose output is a graph output, and every IR activation
asked for is one. Its values differ from the unoptimized run's by float32 rounding (a fused BatchNorm,
another order of additions: at most 1.5e-5 of a tensor's magnitude on the benchmark nets) and, as
before, not with the batch size or the thread count (tests/runtime/test_onnx_float_optimized.py).

`fixpoint quantize` runs the same calibration batches through the model several times (calibration, the
per-channel ranges, bias correction's float means, the reference outputs): within `reusing()` a batch
run again returns what its first run returned, up to REUSE_BYTES of outputs kept - read-only arrays,
so that a caller writing into one fails loudly instead of changing what the next caller gets.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from quantcore.display import said
from quantcore.errors import ModelError
from quantcore.ir import Graph, Op, io_layout
from quantcore.runtime import float_exec

Array = np.ndarray
REUSE_BYTES = 128 * 2**20
"""Outputs kept by `reusing()`: every batch of the Fashion-MNIST benchmark nets' 100 calibration samples
(52 MiB on MobileNetV2); a larger calibration set keeps its first batches, the rest run again."""


UNSAFE_OPTIMIZERS = ["ConstantFolding"]
"""onnxruntime's graph optimizers an optimized session leaves out (the module docstring): constant
folding would compute at session creation whatever constant subgraph a (hostile) model holds."""


def inference_session(model: bytes, threads: int, optimized: bool, dump: str | None = None) -> Any:
    """An onnxruntime session of `model`, as the float model runs it: `threads` intra-op threads (0 for
    its own choice), the graph optimizations on or off (the module docstring); onnxruntime's exceptions
    pass through. `dump`, when given, is where onnxruntime writes the model it will run (optimized)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    levels = ort.GraphOptimizationLevel
    options.graph_optimization_level = levels.ORT_ENABLE_ALL if optimized else levels.ORT_DISABLE_ALL
    options.log_severity_level = 4  # fatal only: an error reaches the user as a ModelError, once
    # Idle pool threads wait on a condition instead of spinning (onnxruntime's default): the same
    # threads split the same work (results unchanged), without burning a core between operators.
    # On the shared 2-core benchmark machine, MobileNetV2 over 5,000 test images: 3.6 -> 2.1 s CPU,
    # 6-10 -> 3-5 s wall; quantize's calibration pass over 100 images: 0.13 -> 0.07 s CPU.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = threads
    if dump is not None:
        options.optimized_model_filepath = dump
    return ort.InferenceSession(
        model,
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=UNSAFE_OPTIMIZERS if optimized else None,
    )


class _Session(NamedTuple):
    session: Any
    """The onnxruntime InferenceSession."""
    wanted: list[str]
    """The IR activations the ONNX model computes, asked for as extra outputs."""
    output_names: list[str]
    per_sample: bool
    """A model exported with a fixed batch of 1 runs sample by sample; a symbolic batch runs whole - unless
    the model has an LSTM: its sequence-first tensors (seq, batch, ...) would interleave a batch run's
    samples on their second axis, where the IR stacks each sample's rows on the first."""


class OnnxFloat:
    """Runs the source ONNX model and returns the float tensors the IR graph names.

    The onnxruntime session is made when first needed (or by `load`): a model loaded only for its graph
    (the language server, `fixpoint generate`) never makes one in this process."""

    def __init__(self, model: bytes, graph: Graph) -> None:
        self.source, self.graph = model, graph
        self._kept: dict[bytes, dict[str, Array]] | None = None
        self._kept_bytes = 0
        self._threads = 0  # onnxruntime's intra-op threads; 0 is its own choice (one per core)
        self._optimized = False  # its graph optimizations (for_evaluation)

    @contextlib.contextmanager
    def reusing(self) -> Iterator[None]:
        """Within: a batch run before (the same input bytes) is not run again; it gets the first run's
        outputs (onnxruntime's results for the same input, without the time), read-only."""
        self._kept, self._kept_bytes = {}, 0
        try:
            yield
        finally:
            self._kept, self._kept_bytes = None, 0

    def for_evaluation(self) -> None:
        """The session, if made from now on, is evaluate's: onnxruntime's graph optimizations on (the
        module docstring), and each operator on one thread - evaluate runs the float model in a thread
        of its own beside the int8 kernels, and a pool splitting each operator over the cores as well
        only adds its waits (MobileNetV2 over 10,000 images: 1-2 s less CPU time, the same
        activations)."""
        self._threads, self._optimized = 1, True

    def load(self) -> None:
        """Make the onnxruntime session now; ModelError when onnxruntime refuses the model."""
        self._session  # noqa: B018 - made and kept by the cached property

    @functools.cached_property
    def _session(self) -> _Session:
        import onnx

        proto = onnx.load_from_string(self.source)
        _sequence_first_lstms(proto.graph)
        known = {v.name for v in proto.graph.value_info} | {
            n for node in proto.graph.node for n in node.output
        }
        existing = {o.name for o in proto.graph.output}
        wanted = [t.name for t in self.graph.activations() if t.name in known]
        for name in wanted:
            if name not in existing:
                proto.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
        try:
            session = inference_session(proto.SerializeToString(), self._threads, self._optimized)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(self._name(), f"onnxruntime cannot load the model: {said(exc)}") from exc
        inputs = session.get_inputs()
        return _Session(
            session,
            wanted,
            [o.name for o in session.get_outputs()],
            all(isinstance(i.shape[0], int) for i in inputs if i.shape)
            or any(node.op is Op.LSTM for node in self.graph.nodes),
        )

    def _name(self) -> str:
        return str(self.graph.meta.get("source", self.graph.name))

    def __getstate__(self) -> dict[str, object]:
        """Pickled as its model and graph (an onnxruntime session cannot be): a calibration worker
        process rebuilds the session from them."""
        return {"source": self.source, "graph": self.graph}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["source"], state["graph"])  # type: ignore[misc]

    def activations(self, feeds_nchw: dict[str, Array], layout: bool = True) -> dict[str, Array]:
        """Every IR activation for one batch of model inputs (given in the ONNX model's own layout).

        With layout=False the values keep ONNX's layout: enough for statistics, which ignore the order
        of elements, and it saves a transposed copy of every tensor.
        """
        by_name = self._run(feeds_nchw)
        arrange = io_layout.to_firmware if layout else _as_is
        result: dict[str, Array] = {}
        for name in self._session.wanted:
            result[name] = arrange(self.graph, name, np.asarray(by_name[name]))
        for name in self.graph.inputs:
            result[name] = arrange(self.graph, name, np.asarray(feeds_nchw[name]))
        missing = [n.outputs[0] for n in self.graph.nodes if n.outputs[0] not in result]
        if missing and not layout:
            return self.activations(feeds_nchw)  # the IR executor needs the IR layout
        return _fill_missing(self.graph, result)

    def _run(self, feeds: dict[str, Array]) -> dict[str, Array]:
        feeds = {k: np.ascontiguousarray(v, np.float32) for k, v in feeds.items()}
        if self._kept is None:
            return self._run_session(feeds)
        key = _key(feeds)
        outputs = self._kept.get(key)
        if outputs is None:
            outputs = self._run_session(feeds)
            size = sum(v.nbytes for v in outputs.values())
            if self._kept_bytes + size > REUSE_BYTES:
                return outputs
            for value in outputs.values():
                value.flags.writeable = False  # shared by every caller of this batch from now on
            self._kept[key], self._kept_bytes = outputs, self._kept_bytes + size
        return dict(outputs)

    def _run_session(self, feeds: dict[str, Array]) -> dict[str, Array]:
        n = len(next(iter(feeds.values())))
        session, _, output_names, per_sample = self._session
        try:
            if not per_sample or n == 1:
                return dict(zip(output_names, session.run(None, feeds), strict=True))
            runs = [session.run(None, {k: v[i : i + 1] for k, v in feeds.items()}) for i in range(n)]
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(self._name(), f"onnxruntime failed: {said(exc)}") from exc
        return {name: np.concatenate([r[j] for r in runs]) for j, name in enumerate(output_names)}


def _sequence_first_lstms(graph: Any) -> None:
    """Rewrite each batch-first LSTM (layout 1), which onnxruntime's CPU kernel refuses, as the same
    layer sequence-first between transposes: (batch, seq, ...) inputs and initial states in, Y and its
    final states out in layout 1's shapes, under their own names."""
    import onnx

    nodes = []
    for node in graph.node:
        layout = next((a for a in node.attribute if a.name == "layout"), None)
        if node.op_type != "LSTM" or layout is None or layout.i != 1:
            nodes.append(node)
            continue
        layout.i = 0
        for index in (0, 5, 6):  # X, initial_h, initial_c: swap their first two axes
            if index < len(node.input) and node.input[index]:
                moved = f"{node.input[index]}:{node.name}:sequence_first"
                nodes.append(onnx.helper.make_node("Transpose", [node.input[index]], [moved], perm=[1, 0, 2]))
                node.input[index] = moved
        nodes.append(node)
        for index, perm in ((0, [2, 0, 1, 3]), (1, [1, 0, 2]), (2, [1, 0, 2])):  # Y, Y_h, Y_c
            if index < len(node.output) and node.output[index]:
                name = node.output[index]
                node.output[index] = f"{name}:{node.name}:sequence_first"
                nodes.append(onnx.helper.make_node("Transpose", [node.output[index]], [name], perm=perm))
    del graph.node[:]
    graph.node.extend(nodes)


def _key(feeds: dict[str, Array]) -> bytes:
    """The identity of a batch: each input's name, shape and float32 bytes."""
    digest = hashlib.blake2b(digest_size=32)
    for name in sorted(feeds):
        value = feeds[name]
        digest.update(f"{name}\0{value.shape}\0".encode())
        digest.update(value.tobytes())
    return digest.digest()


def _as_is(graph: Graph, name: str, value: Array) -> Array:
    return value


def _fill_missing(graph: Graph, env: dict[str, Array]) -> dict[str, Array]:
    """Compute, with the IR float executor, activations that onnxruntime could not return."""
    for node in graph.nodes:
        out = node.outputs[0]
        if out in env:
            continue
        args: list[Any] = []
        for name in node.inputs:
            if not name:
                args.append(None)
            elif graph.tensor(name).is_constant:
                args.append(graph.constant(name).astype(np.float64))
            else:
                args.append(env[name])
        env[out] = float_exec.evaluate(graph, node, args)
    return env
