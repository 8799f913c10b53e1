"""The error of quantization-aware training: a graph, setting or data set QAT cannot work with."""

from __future__ import annotations

from quantcore.errors import QuantcoreError


class QatError(QuantcoreError):
    """QAT cannot run as asked; the message names the layer, tensor or setting and what to do."""
