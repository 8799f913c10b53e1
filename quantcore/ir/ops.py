"""The operators of the IR. Each member carries what the rest of the engine needs to know about it.

The importer produces float graphs in ONNX's layout (NCHW) using these ops; passes rewrite them into the
CMSIS-NN form (NHWC, depthwise split out, activations fused, no-ops removed) before calibration.
"""

from __future__ import annotations

import enum


class Layout(enum.Enum):
    """Memory layout of a 4-D activation tensor."""

    NCHW = "NCHW"
    NHWC = "NHWC"


class Activation(enum.Enum):
    """An activation fused into its producer; it becomes the kernel's [act_min, act_max] clamp."""

    NONE = "none"
    RELU = "relu"
    RELU6 = "relu6"
    CLIP = "clip"  # an arbitrary [min, max] clip (node attr "clip")


class Op(enum.Enum):
    """IR operators: (json name, computes = is a 'layer' with an output worth measuring).

    Inputs and attributes of each op in a float graph as the importers produce it (ONNX layout, NCHW;
    tuples are (h, w) unless said otherwise; "" marks an absent optional input):
      CONV2D            (x, w OIHW const, b | "")  strides, pads (top, left, bottom, right), dilations,
                        groups, activation (Activation), clip (lo, hi) when activation is CLIP
      DEPTHWISE_CONV2D  produced by passes from CONV2D with groups == C_in (then w is (1, kh, kw, C*m))
      FULLY_CONNECTED   (x (N, K), w (out, in) const, b | "")  activation, clip
      BATCH_NORM        (x, scale, bias, mean, var) consts  epsilon
      RELU (x); CLIP (x) min, max (None = unbounded)
      MAX_POOL, AVG_POOL (x)  kernel, strides, pads (top, left, bottom, right), ceil_pads (bottom,
                        right: the part of pads ONNX's ceil_mode added); AVG_POOL count_include_pad (the
                        declared pads count in the average, ceil_pads never do)
      GLOBAL_AVG_POOL   (x)
      ADD, MUL          (a, b)  activation, clip; b may be a constant (broadcast as numpy does)
      SOFTMAX           (x)  axis (non-negative)
      CONCAT            (x1, x2, ...)  axis (non-negative)
      PAD               (x)  pads (ONNX order: begins for every axis, then ends), value (constant mode)
      RESHAPE           (x)  shape (static, fully resolved)
      TRANSPOSE         (x)  perm
      IDENTITY          (x)  (Identity, Dropout at inference)
      REQUANTIZE        (x)  inserted by the quantizer where an int8 tensor meets an int16 layer or back
      SVDF              (x (batch, input), weights_feature (filters, input) const, weights_time (filters,
                        memory) const, b (filters // rank,) | "")  rank, state (STATE: the persistent
                        activation state, (batch, filters * memory), its dtype, scale and zero point)
      LSTM              (x, 4 input weights (hidden, input), 4 recurrent weights (hidden, hidden), 4 biases
                        (hidden,); each four in gate order input, forget, cell, output)  time_major,
                        cell_clip (float, 0 = none), cell_activation ("tanh" | "sigmoid"), hidden_state and
                        cell_state (STATE dicts; TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM, no peepholes,
                        projection or layer norm); streaming (bool, default True): False for an ONNX
                        LSTM, whose every inference starts from the zero state (the kernel's stateless
                        call), and whose states are set at quantization (hidden: the output's scale and
                        zero point; cell: int16, power-of-two scale from the calibrated cell range);
                        last_step (bool, default False): the output is only the last step's hidden
                        state (batch, hidden) (ONNX's Y_h)
    SVDF and LSTM are stateful: their state persists from one inference to the next (streaming), so the
    executors run a batch of samples as that many inferences in order, starting from the reset state.
    Every tensor has a static shape; graph inputs have the batch dimension fixed (1 unless configured).
    """

    CONV2D = ("conv2d", True)
    DEPTHWISE_CONV2D = ("depthwise_conv2d", True)
    FULLY_CONNECTED = ("fully_connected", True)
    BATCH_NORM = ("batch_norm", True)
    RELU = ("relu", True)
    CLIP = ("clip", True)
    MAX_POOL = ("max_pool", True)
    AVG_POOL = ("avg_pool", True)
    GLOBAL_AVG_POOL = ("global_avg_pool", True)
    ADD = ("add", True)
    MUL = ("mul", True)
    SOFTMAX = ("softmax", True)
    CONCAT = ("concat", False)
    PAD = ("pad", False)
    RESHAPE = ("reshape", False)
    TRANSPOSE = ("transpose", False)
    IDENTITY = ("identity", False)
    REQUANTIZE = ("requantize", False)
    SVDF = ("svdf", True)
    LSTM = ("lstm", True)

    @property
    def stateful(self) -> bool:
        """Keeps a state across inferences (a recurrent layer)."""
        return self in (Op.SVDF, Op.LSTM)

    def __init__(self, json_name: str, computes: bool) -> None:
        self.json_name = json_name
        self.computes = computes

    @classmethod
    def from_json(cls, name: str) -> Op:
        for member in cls:
            if member.json_name == name:
                return member
        raise ValueError(f"unknown op {name!r}")
