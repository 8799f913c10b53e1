"""Float ONNX models with an LSTM for tests: hand-built with onnx.helper (either layout) and exported from
torch.nn.LSTM by torch.onnx.export with its defaults (no binary fixtures in the repo)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def lstm_model(
    *,
    layout: int = 1,
    batch: int = 1,
    seq: int = 9,
    features: int = 10,
    hidden: int = 16,
    seed: int = 0,
    squeeze: bool = True,
    bias: bool = True,
    extra: Mapping[int, np.ndarray | str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    outputs: Sequence[str] = ("Y",),
    final_state: bool = False,
) -> onnx.ModelProto:
    """x (batch, seq, features) -> [Transpose to sequence first (layout 0)] -> LSTM -> [Squeeze of the
    direction axis]; with `final_state`, the graph's output is Y_h alone. `extra` sets LSTM inputs 4..
    (sequence_lens, initial_h, initial_c, P): an array becomes an initializer, a string names a graph
    input of that name."""
    rng = np.random.default_rng(seed)
    dirs = 2 if (attrs or {}).get("direction") == "bidirectional" else 1
    inits = {
        "W": (rng.standard_normal((dirs, 4 * hidden, features)) * 0.4).astype(np.float32),
        "R": (rng.standard_normal((dirs, 4 * hidden, hidden)) * 0.3).astype(np.float32),
    }
    if bias:
        inits["B"] = (rng.standard_normal((dirs, 8 * hidden)) * 0.3).astype(np.float32)
    inputs = ["xt" if layout == 0 else "x", "W", "R", "B" if bias else ""]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch, seq, features))]
    for index, given in sorted((extra or {}).items()):
        inputs += [""] * (index + 1 - len(inputs))
        name = f"in{index}"
        if isinstance(given, str):
            state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
            graph_inputs.append(helper.make_tensor_value_info(given, TensorProto.FLOAT, state))
            name = given
        else:
            inits[name] = given
        inputs[index] = name
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="to_sequence_first")]
    nodes = nodes if layout == 0 else []
    lstm_attrs = {"hidden_size": hidden, "layout": layout, **(attrs or {})}
    if final_state:
        outputs, squeeze = ("", "Y_h"), False
    nodes.append(helper.make_node("LSTM", inputs, list(outputs), name="lstm", **lstm_attrs))
    y_shape = [seq, dirs, batch, hidden] if layout == 0 else [batch, seq, dirs, hidden]
    out, out_shape = ("Y_h", []) if final_state else ("Y", y_shape)
    if squeeze:
        inits["axes"] = np.array([1 if layout == 0 else 2], np.int64)
        nodes.append(helper.make_node("Squeeze", ["Y", "axes"], ["Ys"], name="squeeze"))
        out, out_shape = "Ys", [d for i, d in enumerate(y_shape) if i != (1 if layout == 0 else 2)]
    state_shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    graph_outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape or state_shape)]
    graph_outputs += [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, state_shape)
        for o in outputs[1:]
        if o and o != out
    ]
    initializers = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    graph = helper.make_graph(nodes, "lstm", graph_inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def torch_lstm_classifier(
    path: Path,
    seq: int = 12,
    features: int = 10,
    hidden: int = 16,
    classes: int = 5,
    legacy: bool = False,
    head: str = "flatten",
) -> Path:
    """torch.nn.LSTM(batch_first=True) -> `head` -> Linear, exported by torch.onnx.export's defaults to
    `path` (`legacy`: by the TorchScript exporter, opset 13, a dynamic batch). `head`: "flatten" (every
    step), "h_n" (h_n[-1], the final hidden state) or "last" (y[:, -1], the last step of the sequence)."""
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(features, hidden, batch_first=True)
            self.fc = torch.nn.Linear(seq * hidden if head == "flatten" else hidden, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, (h, _) = self.lstm(x)
            heads = {
                "flatten": lambda: y.reshape(x.shape[0], -1),
                "h_n": lambda: h[-1],
                "last": lambda: y[:, -1],
            }
            return self.fc(heads[head]())  # type: ignore[no-any-return]

    torch.manual_seed(0)
    net = Classifier().eval()
    x = (torch.randn(1, seq, features),)
    if legacy:
        dynamic = {"input": {0: "N"}, "logits": {0: "N"}}
        torch.onnx.export(net, x, str(path), dynamo=False, opset_version=13, input_names=["input"],
                          output_names=["logits"], dynamic_axes=dynamic)  # fmt: skip
    else:
        torch.onnx.export(net, x, str(path), external_data=False)
    return path
