"""The options of quantization-aware training, importable without torch (the CLI builds its parser
from them on every `fixpoint` start; torch is imported only when `fixpoint qat` runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOSSES = ("distill", "labels")


@dataclass(frozen=True)
class QatOptions:
    epochs: int = 2
    lr: float = 1e-4
    """Adam learning rate of the weights and biases."""
    range_lr: float = 1e-3
    """Adam learning rate of the activation ranges, in units of each range's starting width."""
    batch_size: int = 64
    """The global batch (split evenly across processes)."""
    loss: str = "distill"
    samples: int | None = None
    """Training samples per epoch (the first N of the training set); None: all."""
    seed: int = 0
    start: Any = None
    """The pipeline.QuantizeOptions of the post-training quantization training starts from."""
    progress: bool = False
