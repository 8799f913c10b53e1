"""What the recurrent kernels' parameters mean, for hovers: the arguments of arm_lstm_unidirectional_s8/
_s16, arm_svdf_s8 and arm_svdf_state_s16_s8, the fields of the structs they take (cmsis_nn_lstm_params,
cmsis_nn_lstm_gate, cmsis_nn_lstm_context, cmsis_nn_svdf_params), and a recurrent layer's params as the
quant-params JSON records them.

The facts are read from CMSIS-NN's arm_nnfunctions.h, arm_nn_types.h and the kernels' sources (which
fields a kernel reads, in which type); the wording is ours.
"""

from __future__ import annotations

from typing import Any

_LSTM_ARGS = (
    ("input", "the input sequence, `time_steps` steps of `input_size` values per batch, laid out as"
     " `time_major` says"),
    ("output", "the hidden state after every step, in the input's layout (`hidden_size` values a step);"
     " each step's output is the next step's recurrent input"),
    ("params", "`cmsis_nn_lstm_params`: sizes, the cell's rescalings and the four gates"),
    ("buffers", "`cmsis_nn_lstm_context`: two work buffers and the state kept between calls"),
)  # fmt: skip
_SVDF_ARGS = (
    ("input_ctx", "int32 work buffer of batch x filters: each filter's sum over its time window"),
    ("output_ctx", "int32 work buffer of batch x units: each unit's sum over its rank filters"),
    ("svdf_params", "`cmsis_nn_svdf_params`: rank, zero points and clamps"),
    ("input_quant_params", "multiplier and shift taking input x feature weights to the state's scale"),
    ("output_quant_params", "multiplier and shift taking state x time weights to the output's scale"),
    ("input_dims", "n = batch, h = input size"),
    ("input_data", "int8 input of this step"),
    ("state_dims", "n = batch, h = filters x memory"),
    ("state_data", "the state: the last `memory` feature products of each filter, moved one step"
     " along on every call (persistent: streaming keeps it between calls)"),
    ("weights_feature_dims", "n = filters, h = input size"),
    ("weights_feature_data", "int8 feature weights, a row of `input size` per filter"),
    ("weights_time_dims", "n = filters, h = memory"),
    ("weights_time_data", "time weights, a row of `memory` per filter"),
    ("bias_dims", "n = units"),
    ("bias_data", "int32 bias per unit at the state x time weights' scale (may be NULL)"),
    ("output_dims", "n = batch, h = units"),
    ("output_data", "int8 output of this step"),
)  # fmt: skip

KERNELS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "arm_lstm_unidirectional_s8": (
        "int8 input and output, int16 gates and cell state, int32 effective biases", _LSTM_ARGS),
    "arm_lstm_unidirectional_s16": (
        "int16 input and output (symmetric: every offset 0), int16 gates and cell state, int64 effective"
        " biases", _LSTM_ARGS),
    "arm_svdf_s8": (
        "int8 state and time weights", (
            ("ctx", "int32 buffer for the feature weights' row sums (used by the MVE path;"
             " arm_svdf_s8_get_buffer_size says how big)"),
            *_SVDF_ARGS[:8],
            ("state_data", "int8 state; " + _SVDF_ARGS[8][1].split(": ", 1)[1]),
            *_SVDF_ARGS[9:12],
            ("weights_time_data", "int8 time weights, a row of `memory` per filter"),
            *_SVDF_ARGS[13:],
        )),
    "arm_svdf_state_s16_s8": (
        "int8 input and output, int16 state and time weights", (
            *_SVDF_ARGS[:8],
            ("state_data", "int16 state; " + _SVDF_ARGS[8][1].split(": ", 1)[1]),
            *_SVDF_ARGS[9:12],
            ("weights_time_data", "int16 time weights, a row of `memory` per filter"),
            *_SVDF_ARGS[13:],
        )),
}  # fmt: skip
"""Kernel -> (what its types are, its arguments in order with what each is)."""

STRUCTS: dict[str, tuple[tuple[str, str], ...]] = {
    "cmsis_nn_lstm_params": (
        ("time_major", "1: input and output are [time][batch][size]; 0: [batch][time][size]"),
        ("batch_size", "sequences run side by side"),
        ("time_steps", "steps of each sequence this call runs"),
        ("input_size", "values per input step"),
        ("hidden_size", "units: the length of the hidden and the cell state, and of an output step"),
        (
            "input_offset",
            "the input's zero point negated; already folded into the gates' input effective"
            " biases (the kernel does not read it)",
        ),
        (
            "forget_to_cell_multiplier",
            "with forget_to_cell_shift: takes forget gate x old cell state to the cell state's scale",
        ),
        ("forget_to_cell_shift", "its exponent (> 0: left)"),
        (
            "input_to_cell_multiplier",
            "with input_to_cell_shift: takes input gate x cell gate to the cell state's scale",
        ),
        ("input_to_cell_shift", "its exponent (> 0: left)"),
        ("cell_clip", "bound on the cell state's magnitude, in its int16 domain"),
        (
            "cell_scale_power",
            "log2 of the cell state's scale: where the tanh of the cell state puts the binary point",
        ),
        (
            "output_multiplier",
            "with output_shift: takes output gate x tanh(cell) to the hidden state's scale",
        ),
        ("output_shift", "its exponent (> 0: left)"),
        (
            "output_offset",
            "the hidden state's zero point, added to every value written; the output and"
            " the next step's recurrent input share it (int8: in [-128, 127]; s16: 0)",
        ),
        ("forget_gate", "`cmsis_nn_lstm_gate`: how much of the old cell state is kept"),
        ("input_gate", "`cmsis_nn_lstm_gate`: how much of the new candidate enters the cell"),
        ("cell_gate", "`cmsis_nn_lstm_gate`: the new candidate values"),
        ("output_gate", "`cmsis_nn_lstm_gate`: how much of tanh(cell) becomes the hidden state"),
    ),
    "cmsis_nn_lstm_gate": (
        ("input_multiplier", "with input_shift: takes input x input_weights to the gate's Q3.12 domain"),
        ("input_shift", "its exponent (> 0: left)"),
        ("input_weights", "int8 weights applied to the step's input, hidden_size rows of input_size"),
        (
            "input_effective_bias",
            "the gate's bias plus the input weights' row sums times input_offset,"
            " precomputed (int32 for s8, int64 for s16: 4- or 8-byte aligned)",
        ),
        ("hidden_multiplier", "with hidden_shift: takes hidden state x hidden_weights to Q3.12"),
        ("hidden_shift", "its exponent (> 0: left)"),
        (
            "hidden_weights",
            "int8 recurrent weights applied to the previous hidden state, hidden_size rows of hidden_size",
        ),
        (
            "hidden_effective_bias",
            "the recurrent weights' row sums times the hidden state's negated zero"
            " point, precomputed (int32 for s8, int64 for s16)",
        ),
        ("bias", "not read by the kernels: the effective biases carry the bias"),
        ("activation_type", "ARM_SIGMOID (input, forget, output gates) or ARM_TANH (the cell gate)"),
    ),
    "cmsis_nn_lstm_context": (
        ("temp1", "int16 work buffer of batch_size x hidden_size (the gates' outputs): 2-byte aligned"),
        ("temp2", "int16 work buffer of batch_size x hidden_size (the cell gate, tanh(cell))"),
        ("cell_state", "int16 cell state, batch_size x hidden_size, kept from call to call"),
        (
            "hidden_state",
            "the hidden state (int8 for s8, int16 for s16), kept from call to call; with NULL"
            " each call starts with no recurrent product and a cleared cell state",
        ),
    ),
    "cmsis_nn_svdf_params": (
        ("rank", "filters per output unit"),
        ("input_offset", "the input's zero point itself: the kernel subtracts it (in [-128, 127])"),
        ("output_offset", "the output's zero point, added to every output value (in [-128, 127])"),
        ("input_activation", "clamp [min, max] of every new state value: the state type's range"),
        ("output_activation", "clamp [min, max] of the output"),
    ),
}
"""Struct -> its fields in order, with what each is."""

_LAYER_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "lstm": (
        *((k, m) for k, m in STRUCTS["cmsis_nn_lstm_params"] if k in ("time_major", "input_offset")),
        ("hidden_offset", "the hidden state's zero point negated: folded into the gates' hidden effective"
         " biases"),
        *((k, m) for k, m in STRUCTS["cmsis_nn_lstm_params"][6:15]),
        ("cell_activation", "the cell gate's non-linearity"),
    ),
    "svdf": (
        *STRUCTS["cmsis_nn_svdf_params"][:3],
        ("input_multiplier", "with input_shift: input x feature weights to the state's scale"),
        ("input_shift", "its exponent (> 0: left)"),
        ("output_multiplier", "with output_shift: state x time weights to the output's scale"),
        ("output_shift", "its exponent (> 0: left)"),
        *STRUCTS["cmsis_nn_svdf_params"][3:],
        ("state_zero_point", "the state's zero point: 0, as the CMSIS-NN kernels subtract none"),
        ("state_scale", "a float SVDF's int16 state scale, max |state| / 32767 over its calibrated range:"
         " the input and output multipliers are computed from it"),
    ),
}  # fmt: skip


def kernel_markdown(word: str) -> str | None:
    """The hover of a recurrent kernel's or struct's name, None for any other word."""
    if word in KERNELS:
        types, args = KERNELS[word]
        return "\n".join([f"**{word}** - {types}", "", *_table(("argument", "what it is"), args)])
    if word in STRUCTS:
        return "\n".join([f"**{word}**", "", *_table(("field", "what it is"), STRUCTS[word])])
    return None


def layer_rows(layer: dict[str, Any]) -> list[str]:
    """A recurrent layer's params (from the JSON) with what each is; the LSTM's gates as a second table."""
    fields = _LAYER_FIELDS.get(str(layer.get("op")))
    params = layer.get("params")
    if fields is None or not isinstance(params, dict):
        return []
    rows = [(key, f"{_value(params[key])}", meaning) for key, meaning in fields if key in params]
    lines = ["", "| field | value | what it is |", "|---|---|---|"]
    lines += [f"| {key} | {value} | {meaning} |" for key, value, meaning in rows]
    gates = params.get("gates")
    if isinstance(gates, dict):
        lines += ["", "| gate | input multiplier, shift | hidden multiplier, shift |", "|---|---|---|"]
        for name in ("forget", "input", "cell", "output"):
            g = gates.get(name)
            if isinstance(g, dict):
                x = f"{_value(g.get('input_multiplier'))}, {_value(g.get('input_shift'))}"
                h = f"{_value(g.get('hidden_multiplier'))}, {_value(g.get('hidden_shift'))}"
                lines.append(f"| {name} | {x} | {h} |")
    return lines


def _value(value: object) -> str:
    """A JSON value as table text: numbers and booleans as they are, anything else quoted as code."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return "[" + ", ".join(str(v) for v in value) + "]"
    text = str(value).replace("`", "'").replace("|", "/").replace("\n", " ")[:40]
    return f"`{text}`"


def _table(head: tuple[str, str], rows: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"| {head[0]} | {head[1]} |", "|---|---|", *(f"| `{name}` | {what} |" for name, what in rows)]
