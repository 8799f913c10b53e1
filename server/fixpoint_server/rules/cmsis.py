"""What the C rules (misaligned-array, unscaled-bias, wrong-zero-point) share: the CMSIS-NN kernel
signatures (KERNELS) and the matching of C names to the JSON's layers (Layers); the workspace's C
facts they read come from incremental.c_workspace.

Not a rule: it has no CODES and is not in RULE_MODULES.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fixpoint_server.parse.c_source import Argument, CallSite, CWorkspace, referenced_name
from fixpoint_server.parse.params import ParamsFile, QuantizedModel
from fixpoint_server.rules.context import CheckContext
from quantcore.codegen.names import c_identifier
from quantcore.cores import Extension
from quantcore.ir import Node

# ------------------------------------------------------------------------------ CMSIS-NN kernels


@dataclass(frozen=True)
class Kernel:
    """A CMSIS-NN function's parameters by name, in order (arm_nnfunctions.h of CMSIS-NN v7)."""

    name: str
    params: tuple[str, ...]
    bias_bytes: int | None = None
    """Bytes of one bias element the kernel reads: 4 (int32) for s8, 8 (int64) for s16."""

    def argument(self, call: CallSite, param: str) -> Argument | None:
        if param not in self.params:
            return None
        index = self.params.index(param)
        return call.args[index] if index < len(call.args) else None


_CONV = ("ctx", "conv_params", "quant_params", "input_dims", "input_data", "filter_dims", "filter_data",
         "bias_dims", "bias_data", "output_dims", "output_data")  # fmt: skip
_CONV_UPSCALE = (*_CONV[:9], "upscale_dims", *_CONV[9:])
_DEPTHWISE = ("ctx", "dw_conv_params", *_CONV[2:])
_FULLY_CONNECTED = ("ctx", "fc_params", *_CONV[2:])
_TRANSPOSE = ("ctx", "output_ctx", "transpose_conv_params", *_CONV[2:])
_POOL = ("ctx", "pool_params", "input_dims", "input_data", "filter_dims", "output_dims", "output_data")
_ADD = ("input_1_vect", "input_2_vect", "input_1_offset", "input_1_mult", "input_1_shift", "input_2_offset",
        "input_2_mult", "input_2_shift", "left_shift", "output", "out_offset", "out_mult", "out_shift",
        "out_activation_min", "out_activation_max", "block_size")  # fmt: skip
_SVDF_STATE = ("input_ctx", "output_ctx", "svdf_params", "input_quant_params", "output_quant_params",
               "input_dims", "input_data", "state_dims", "state_data", "weights_feature_dims",
               "weights_feature_data", "weights_time_dims", "weights_time_data", "bias_dims", "bias_data",
               "output_dims", "output_data")  # fmt: skip
_LSTM = ("input", "output", "params", "buffers")
_MUL = ("input_1_vect", "input_2_vect", "input_1_offset", "input_2_offset", "output", "out_offset",
        "out_mult", "out_shift", "out_activation_min", "out_activation_max", "block_size")  # fmt: skip


def _kernels() -> dict[str, Kernel]:
    table = [Kernel(name, _CONV, 4) for name in (
        "arm_convolve_wrapper_s8", "arm_convolve_1x1_s8_fast", "arm_convolve_1x1_s8", "arm_convolve_1_x_n_s8",
    )]  # fmt: skip
    table += [Kernel("arm_convolve_s8", _CONV_UPSCALE, 4), Kernel("arm_convolve_wrapper_s16", _CONV, 8)]
    table += [Kernel("arm_convolve_s16", _CONV, 8)]
    table += [Kernel(name, _DEPTHWISE, 4) for name in (
        "arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_s8", "arm_depthwise_conv_3x3_s8",
        "arm_depthwise_conv_s8_opt",
    )]  # fmt: skip
    table += [Kernel(name, _DEPTHWISE, 8) for name in (
        "arm_depthwise_conv_wrapper_s16", "arm_depthwise_conv_s16", "arm_depthwise_conv_fast_s16",
    )]  # fmt: skip
    table += [Kernel(name, _FULLY_CONNECTED, 4) for name in (
        "arm_fully_connected_s8", "arm_fully_connected_per_channel_s8", "arm_fully_connected_wrapper_s8",
    )]  # fmt: skip
    table += [Kernel("arm_fully_connected_s16", _FULLY_CONNECTED, 8)]
    table += [
        Kernel(name, _TRANSPOSE, 4) for name in ("arm_transpose_conv_wrapper_s8", "arm_transpose_conv_s8")
    ]
    table += [Kernel(name, _POOL) for name in ("arm_max_pool_s8", "arm_avgpool_s8", "arm_max_pool_s16",
                                               "arm_avgpool_s16")]  # fmt: skip
    table += [Kernel("arm_elementwise_add_s8", _ADD), Kernel("arm_elementwise_add_s16", _ADD)]
    table += [Kernel("arm_elementwise_mul_s8", _MUL), Kernel("arm_elementwise_mul_s16", _MUL)]
    table += [
        Kernel("arm_vector_sum_s8", ("vector_sum_buf", "vector_cols", "vector_rows", "vector_data",
                                     "lhs_offset", "rhs_offset", "bias_data"), 4),
        Kernel("arm_pad_s8", ("input", "output", "pad_value", "input_size", "pre_pad", "post_pad")),
        Kernel("arm_softmax_s8", ("input", "num_rows", "row_size", "mult", "shift", "diff_min", "output")),
    ]  # fmt: skip
    # The recurrent kernels: arm_svdf_s8 takes a third context (its kernel sums) first; the LSTMs take
    # everything else through cmsis_nn_lstm_params (the gates' effective biases: int32 / int64) and
    # cmsis_nn_lstm_context (field_read_of).
    table += [Kernel("arm_svdf_s8", ("ctx", *_SVDF_STATE), 4)]
    table += [Kernel("arm_svdf_state_s16_s8", _SVDF_STATE, 4)]
    table += [Kernel("arm_lstm_unidirectional_s8", _LSTM, 4), Kernel("arm_lstm_unidirectional_s16", _LSTM, 8)]
    return {k.name: k for k in table}


KERNELS = _kernels()
"""The kernels whose arguments the C rules read, by name."""
_KERNEL_SUFFIX = re.compile(r"_(?:s8|s16|s4|q7|q15)(?:_|$)")


def is_kernel(name: str) -> bool:
    """Whether `name` is a CMSIS-NN integer kernel (or helper) whose pointers it reads with SIMD loads."""
    return name in KERNELS or (name.startswith("arm_") and _KERNEL_SUFFIX.search(name) is not None)


def source_json(ws: CWorkspace, path: Path) -> str | None:
    """The JSON a generated file names in its header (its layers are the ones to compare with)."""
    cfile = ws.files.get(path)
    return cfile.generated.params_name if cfile is not None and cfile.generated is not None else None


# -------------------------------------------------------------------------------------- the layers


@dataclass(frozen=True)
class Layer:
    params: ParamsFile
    model: QuantizedModel
    index: int
    node: Node
    ident: str
    """c_identifier(node.name): how the layer's name appears in C."""

    @property
    def name(self) -> str:
        return self.node.name

    def tensor_scale(self, position: int) -> np.ndarray | None:
        names = self.node.inputs
        if position >= len(names) or not names[position]:
            return None
        quant = self.model.graph.tensor(names[position]).quant
        return None if quant is None else np.asarray(quant.scale, dtype=np.float64).reshape(-1)

    def input_scales(self) -> np.ndarray | None:
        """s_in per output channel: the input's one scale repeated, or for a depthwise layer whose input
        has per-channel scales (transforms.dw_channel_scales) channel c // ch_mult's."""
        s_in, s_w = self.tensor_scale(0), self.tensor_scale(1)
        bias = self.bias()
        channels = len(bias) if bias is not None else (len(s_w) if s_w is not None else 0)
        if s_in is None or not len(s_in) or not channels:
            return None
        if len(s_in) == 1:
            return np.full(channels, s_in[0])
        return np.repeat(s_in, channels // len(s_in)) if channels % len(s_in) == 0 else None

    def bias(self) -> np.ndarray | None:
        """The layer's integer bias as the quantized graph holds it, None when the layer has none. None
        for the recurrent layers too: an SVDF's bias is its .tflite's own integers at the state's scale
        and an LSTM's biases are folded with the weights' sums into effective biases, neither of them
        round(b / (s_in * s_w[c])) at input 2."""
        if self.node.op.stateful or len(self.node.inputs) < 3 or not self.node.inputs[2]:
            return None
        data = self.model.graph.tensor(self.node.inputs[2]).data
        return None if data is None else np.asarray(data, dtype=np.int64).reshape(-1)


_GENERATED = re.compile(r"(?:^|_)l(\d+)_")


class Layers:
    """The layers of every quant-params JSON whose model builds, and which C names belong to them."""

    def __init__(self, ctx: CheckContext) -> None:
        self.layers: list[Layer] = []
        for params in ctx.params_files():
            model = ctx.quantized(params) if params.document is not None else None
            if model is None or model.error is not None:
                continue  # params_json and stale-generated say why; nothing to compare with here
            for index, node in enumerate(model.graph.nodes):
                self.layers.append(Layer(params, model, index, node, c_identifier(node.name)))

    def __bool__(self) -> bool:
        return bool(self.layers)

    def _of(self, source: str | None) -> list[Layer]:
        mine = [layer for layer in self.layers if source is not None and layer.params.path.name == source]
        return mine or self.layers

    def generated(self, name: str, source: str | None = None) -> Layer | None:
        """The layer of a generated name: `model_l3_pwconv_bias`, `l3_pwconv_params`, `l3_pwconv`."""
        for match in _GENERATED.finditer(name):
            rest = name[match.end() :]
            for layer in self._of(source):
                if layer.index == int(match.group(1)) and (
                    rest == layer.ident or rest.startswith(layer.ident + "_")
                ):
                    return layer
        return None

    def named(self, name: str, source: str | None = None) -> Layer | None:
        """The layer a C name belongs to: generated naming, else the longest layer identifier the name
        holds between non-alphanumerics (`conv1_bias`, `CONV1_BIAS`, `conv1Params`; not `conv10_bias`)."""
        found = self.generated(name, source)
        if found is not None:
            return found
        best: Layer | None = None
        for layer in self._of(source):
            if len(layer.ident) < 2 or (best is not None and len(best.ident) >= len(layer.ident)):
                continue
            # case-insensitive name, but a lowercase letter after it continues a longer word (camelCase ok)
            pattern = rf"(?<![A-Za-z0-9])(?i:{re.escape(layer.ident)})(?![a-z0-9])"
            if re.search(pattern, name):
                best = layer
        return best

    def of_call(self, call: CallSite, source: str | None = None) -> Layer | None:
        """The layer a kernel call runs: its generated function (`l4_residual`), the names of its
        weights, bias or parameter structs, or the name of the function it is in."""
        if call.function is not None and (found := self.generated(call.function, source)) is not None:
            return found
        kernel = KERNELS.get(call.name)
        roles = ("filter_data", "bias_data", "conv_params", "dw_conv_params", "fc_params", "quant_params")
        for role in roles if kernel is not None else ():
            arg = kernel.argument(call, role) if kernel is not None else None
            name = referenced_name(arg.text) if arg is not None else None
            if name is not None and (found := self.named(name, source)) is not None:
                return found
        return self.named(call.function, source) if call.function is not None else None


# ------------------------------------------------------------------------ what the kernels' loads need


@dataclass(frozen=True)
class Read:
    """How a kernel loads the elements of one of its arguments: their C type and size in bytes (C lets
    the compiler assume a pointer of that type is aligned to that size), and where CMSIS-NN does it."""

    ctype: str
    size: int
    source: str
    """The CMSIS-NN file:function that reads it so (the evidence a message quotes)."""


_BYTES = Read("int8_t", 1, "")
_S16_DATA = ("input_data", "output_data", "input_1_vect", "input_2_vect", "output", "input")


def read_of(call_name: str, role: str) -> Read:
    """How `call_name` reads its parameter `role` (a name of Kernel.params): int8 data is read a byte at
    a time or through memcpy (arm_nnsupportfunctions.h: arm_nn_read_s8x4 is `memcpy(&val, in_s8, 4)`,
    one unaligned-tolerant LDR on Cortex-M3/M4/M7/M33, byte loads on Cortex-M0) and with VLDRB on MVE
    (byte alignment: arm_nn_vec_mat_mult_t_s8.c: vldrbq_z_s8), so it needs no alignment at all."""
    kernel = KERNELS.get(call_name)
    if role == "bias_data":
        size = kernel.bias_bytes if kernel is not None and kernel.bias_bytes else 4
        # arm_nn_vec_mat_mult_t_s8.c: `acc_0 = *bias++` (DSP, C); arm_nn_mat_mul_core_1x_s8.c and
        # arm_nn_depthwise_conv_nt_t_s8.c: vldrwq_s32(bias) (MVE); the s16 kernels' int64_t bias likewise
        return Read(f"int{size * 8}_t", size, f"{call_name} (*bias++ on DSP/C, vldrwq_s32(bias) with MVE)")
    if role == "vector_sum_buf":
        return Read("int32_t", 4, "arm_vector_sum_s8.c: vector_sum_buf[i] += ...")
    if call_name in _SVDF_READS:  # before the _s16 rule: arm_svdf_state_s16_s8's data is int8
        return _SVDF_READS[call_name].get(role, _BYTES)
    if role in _S16_DATA and re.search(r"_(?:s16|q15)(?:_|$)", call_name):
        return Read("int16_t", 2, f"{call_name} (int16_t pointers; VLDRH with MVE)")
    return _BYTES


_SVDF_TIME = (
    "arm_svdf_state_s16_s8.c: the time weights and the state are int16_t, multiplied as *v1 * *v2 (as"
    " arm_nn_read_q15x2_ia pairs with DSP)"
)
_SVDF_READS: dict[str, dict[str, Read]] = {
    "arm_svdf_state_s16_s8": {
        "state_data": Read("int16_t", 2, _SVDF_TIME),
        "weights_time_data": Read("int16_t", 2, _SVDF_TIME),
    },
    "arm_svdf_s8": {},  # int8 state and time weights; its int32 buffers come through the contexts
}
"""The SVDF kernels' arrays other than the bias (Kernel.bias_bytes) that are wider than bytes."""
_LSTM_STEP = "arm_nn_lstm_step_s8.c / _s16.c"
_LSTM_CONTEXT = {
    "temp1": Read("int16_t", 2, f"{_LSTM_STEP}: the gates' outputs, int16_t *forget_gate = buffers->temp1"),
    "temp2": Read("int16_t", 2, f"{_LSTM_STEP}: the cell gate's output, int16_t *cell_gate = buffers->temp2"),
    "cell_state": Read("int16_t", 2, f"{_LSTM_STEP}: int16_t *cell_state = buffers->cell_state"),
}  # fmt: skip


def _lstm_read(call_name: str | None, field_name: str) -> Read | None:
    """How an LSTM reads a field of its cmsis_nn_lstm_context or cmsis_nn_lstm_params (a gate's
    `forget_gate.input_effective_bias`); None when that depends on which LSTM kernel, not known here."""
    wide = None if call_name is None else call_name.endswith("_s16")
    if field_name in _LSTM_CONTEXT:
        return _LSTM_CONTEXT[field_name]
    if field_name == "hidden_state":
        if not wide:
            return None if wide is None else _BYTES  # s8: int8 hidden state, byte and VLDRB loads
        return Read("int16_t", 2, "arm_lstm_unidirectional_s16.c: int16_t *hidden_in = buffers->hidden_state")
    if field_name.endswith("_effective_bias"):
        if wide is None:
            return None
        if wide:
            return Read("int64_t", 8, "arm_nn_vec_mat_mul_result_acc_s16.c: const int64_t *effective_bias")
        return Read(
            "int32_t", 4, "arm_nn_vec_mat_mul_result_acc_s8_s16.c: *effective_bias_ptr++ (const int32_t *)"
        )
    return _BYTES  # the int8 weights (byte and VLDRB loads), the gates' `bias` (not read)


def field_read_of(
    call_name: str | None, struct_type: str | None, field_name: str, ext: Extension | None
) -> Read | None:
    """How a kernel reads an array set in a struct's field (`.multiplier = m`, `.buf = scratch`) on a core
    of extension `ext` (None: not known); None when that is not known (a kernel the table lacks)."""
    if field_name in ("multiplier", "shift"):  # cmsis_nn_per_channel_quant_params: int32_t *multiplier
        return Read("int32_t", 4, "the per-channel requantization (quant_params->multiplier[i])")
    if field_name == "data" and struct_type == "cmsis_nn_bias_data":  # an int32_t or int64_t bias
        return Read("int32_t", 4, "the s16 kernels' bias (cmsis_nn_bias_data.data)")
    if field_name == "buf":
        return _scratch_read(call_name, ext)
    if struct_type in ("cmsis_nn_lstm_context", "cmsis_nn_lstm_params") or (
        call_name is not None and call_name.startswith("arm_lstm_unidirectional")
    ):
        return _lstm_read(call_name, field_name)
    return _BYTES


# ctx->buf, as each kernel casts it (CMSIS-NN Source/): the type, and the code paths that use it
_SCRATCH: tuple[tuple[str, Read, tuple[Extension, ...]], ...] = (
    ("arm_fully_connected", Read("int32_t", 4, "arm_fully_connected_s8.c: kernel_sum = (const int32_t *)"
     "ctx->buf, read as *kernel_sum++ by arm_nn_vec_mat_mult_t_s8 with MVE only"), (Extension.MVE,)),
    ("arm_avgpool", Read("int32_t", 4, "arm_avgpool_s8.c: int32_t *buffer = (int32_t *)ctx->buf (the"
     " DSP and C path)"), (Extension.NONE, Extension.DSP)),
    ("arm_transpose_conv", Read("int32_t", 4, "arm_transpose_conv_s8.c: int32_t *buf = ctx->buf"),
     tuple(Extension)),
    ("arm_batch_matmul", Read("int32_t", 4, "arm_batch_matmul_s8.c: vector_sum_buf = (int32_t *)ctx->buf"),
     tuple(Extension)),
    ("arm_svdf", Read("int32_t", 4, "arm_svdf_s8.c and arm_svdf_state_s16_s8.c: int32_t *buffer_a ="
     " (int32_t *)input_ctx->buf, buffer_b from output_ctx->buf (arm_svdf_s8's kernel sums from ctx->buf)"),
     tuple(Extension)),
    ("arm_convolve", Read("int16_t", 2, "arm_convolve_s8.c: int16_t *buffer_a = (int16_t *)ctx->buf"),
     tuple(Extension)),
    ("arm_depthwise_conv", Read("int16_t", 2, "arm_depthwise_conv_s8_opt.c: int16_t *buffer_a ="
     " (int16_t *)ctx->buf"), tuple(Extension)),
)  # fmt: skip


def _scratch_read(call_name: str | None, ext: Extension | None) -> Read | None:
    for prefix, read, paths in _SCRATCH:
        if call_name is not None and call_name.startswith(prefix):
            return read if ext is None or ext in paths else _BYTES
    return None  # a kernel this table does not know: what it casts ctx->buf to is not known


# ------------------------------------------------------------------------------------ the core


@dataclass(frozen=True)
class CoreFacts:
    """The core the firmware is built for, as far as the project says, and what it does with unaligned
    loads (ARMv6-M and ARMv8-M Baseline fault on every one; ARMv7-M and ARMv8-M Mainline do LDR/LDRH/STR/
    STRH unaligned but fault on LDRD/STRD/LDM/STM; MVE's VLDRH/VLDRW fault off their element size)."""

    label: str
    """e.g. "cortex-m4"; "host" for this machine; "" when nothing says."""
    extension: Extension | None
    unaligned_loads: bool
    """Whether single LDR/LDRH tolerate an unaligned address (False for Cortex-M0/M0+/M1/M23)."""
    evidence: str
    """Where the core was read: `fixpoint.toml: target = "qemu-m4"`, `Makefile: -mcpu=cortex-m0`."""

    @property
    def known(self) -> bool:
        return bool(self.label)

    @property
    def host(self) -> bool:
        return self.label == "host"


_MCPU: dict[str, tuple[Extension, bool]] = {
    "cortex-m0": (Extension.NONE, False), "cortex-m0plus": (Extension.NONE, False),
    "cortex-m1": (Extension.NONE, False), "cortex-m23": (Extension.NONE, False),
    "cortex-m3": (Extension.NONE, True), "cortex-m4": (Extension.DSP, True),
    "cortex-m7": (Extension.DSP, True), "cortex-m33": (Extension.DSP, True),
    "cortex-m35p": (Extension.DSP, True), "cortex-m52": (Extension.MVE, True),
    "cortex-m55": (Extension.MVE, True), "cortex-m85": (Extension.MVE, True),
    "host": (Extension.NONE, True),
}  # fmt: skip
UNKNOWN_CORE = CoreFacts("", None, True, "")


def configured_core(ctx: CheckContext) -> CoreFacts:
    """fixpoint.toml's target (or [board] core), else the -mcpu= of the user's build files, else unknown.
    A project whose target is the host and whose build files name no core is built for the host."""
    return ctx.memo("configured-core", lambda: _configured_core(ctx))


def _configured_core(ctx: CheckContext) -> CoreFacts:
    from quantcore.targets.target import BUILTIN

    project = ctx.project
    toml = f"{project.path.name}: " if project.path is not None else "fixpoint.toml: "
    board = project.board
    if board is not None and project.target in (board.name, "board"):
        return _core(board.core.label, f'{toml}[board] core = "{board.core.label}"')
    builtin = BUILTIN.get(project.target)
    if builtin is not None and builtin.cross:
        return _core(builtin.core.label, f'{toml}target = "{project.target}"')
    mcpu = _build_mcpu(ctx)
    if mcpu is not None:
        return mcpu
    if project.path is not None and project.target == "host":
        return _core("host", f'{toml}target = "host"')
    return UNKNOWN_CORE


def _core(label: str, evidence: str) -> CoreFacts:
    extension, unaligned = _MCPU[label]
    return CoreFacts(label, extension, unaligned, evidence)


def _build_mcpu(ctx: CheckContext) -> CoreFacts | None:
    from fixpoint_server.rules.build_facts import user_build_facts

    for facts in user_build_facts(ctx):
        for use in facts.flags:
            if use.flag.startswith("-mcpu="):
                label = use.flag[len("-mcpu=") :].split("+", 1)[0].lower()
                if label in _MCPU and label != "host":
                    return _core(label, f"{ctx.relative(facts.path)}:{use.span.line + 1}: {use.flag}")
    return None
