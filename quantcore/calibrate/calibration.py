"""What calibration hands to quantization: each activation tensor's chosen range, as data (no numpy work
here, so quantcore.quantize.graph can name it without importing the observers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Calibration:
    """What calibration decided for each activation tensor."""

    ranges: Mapping[str, tuple[float, float]]
    observed: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    methods: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Per-channel (min, max) of the tensors that may take per-channel scales."""
