"""The torch networks the importer is tested and benchmarked on, exported by both of torch's exporters.

Each builder makes a seeded module in eval mode with non-trivial BatchNorm statistics (so that folding
BatchNorm into the convolution before it changes the weights): the network of tests/importers/test_torch.py,
the five Fashion-MNIST networks of bench/fashion_mnist/models.py, and three ordinary ones covering the rest
of the support table's layers (padding, depthwise, ReLU6, residual add, concatenation, average and max
pooling, adaptive pooling, Softmax, x.view(x.size(0), -1), a Linear without bias).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench.fashion_mnist.models import MODELS
from quantcore import pipeline
from quantcore.data import DataSet

MNIST = (1, 1, 28, 28)


def _with_statistics(net: nn.Module) -> nn.Module:
    """Random BatchNorm statistics and affine parameters, as after training (fresh ones fold to almost
    nothing)."""
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-1, 1)
                module.running_var.uniform_(0.5, 2)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    return net


def sequential() -> nn.Module:
    """The network of tests/importers/test_torch.py: Conv-BN-ReLU-MaxPool-Flatten-Linear."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


class Blocks(nn.Module):
    """Zero padding, Conv-BN-ReLU, a depthwise ReLU6 branch added back (residual), max and average pools
    concatenated, a 1x1 convolution, AdaptiveAvgPool2d(1), Flatten, Linear, Softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = nn.ZeroPad2d(1)
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.dw_bn = nn.BatchNorm2d(8)
        self.max_pool, self.avg_pool = nn.MaxPool2d(2), nn.AvgPool2d(2)
        self.pw = nn.Conv2d(16, 12, 1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(12, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(self.pad(x))))
        y = nn.functional.relu6(self.dw_bn(self.dw(y))) + y
        y = torch.cat([self.max_pool(y), self.avg_pool(y)], 1)
        return torch.softmax(self.fc(torch.flatten(self.gap(self.pw(y)), 1)), 1)


class Heads(nn.Module):
    """The pooling heads: AdaptiveMaxPool2d(1) and x.mean((2, 3)) (keepdim False) side by side, padding
    before a max pool, x.view(x.size(0), -1), a Linear without bias."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 4, 3, stride=2)
        self.amax = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Linear(6 + 6, 8, bias=False)
        self.fc2 = nn.Linear(4 * 3 * 3, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        pooled = torch.cat([self.amax(y).flatten(1), y.mean((2, 3))], 1)
        z = nn.functional.max_pool2d(nn.functional.pad(torch.relu(self.conv2(y)), (1, 1, 1, 1)), 2)
        return self.fc(pooled) + self.fc2(z.view(z.size(0), -1))


NETS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "test_torch_sequential": (sequential, (1, 3, 8, 8)),
    **{f"fmnist_{name}": (build, MNIST) for name, build in MODELS.items()},
    "blocks": (Blocks, (1, 3, 16, 16)),
    "heads": (Heads, (1, 1, 12, 12)),
}
"""Name -> (builder, input shape)."""


def build(name: str) -> nn.Module:
    """The named network, seeded, with BatchNorm statistics, in eval mode."""
    builder, _ = NETS[name]
    torch.manual_seed(sum(map(ord, name)))
    return _with_statistics(builder()).eval()


CALIBRATION_SEED = 20260418


def calibration(shape: tuple[int, ...], samples: int = 32, seed: int = CALIBRATION_SEED) -> DataSet:
    """A fixed data set for a network: seeded uniform values in [-1, 1] of its input shape."""
    rng = np.random.default_rng(seed)
    return DataSet(rng.uniform(-1, 1, (samples, *shape[1:])).astype(np.float32))


def quantize(
    raw: bytes, path: Path, shape: tuple[int, ...], options: pipeline.QuantizeOptions | None = None
) -> pipeline.QuantizeResult:
    """An exported network written to `path`, loaded and quantized on the fixed calibration set with the
    default method (or `options`)."""
    path.write_bytes(raw)
    return pipeline.quantize(
        pipeline.load_model(path), calibration(shape), options or pipeline.QuantizeOptions()
    )
