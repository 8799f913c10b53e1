"""Five small networks typical of microcontroller deployments, for 1x28x28 Fashion-MNIST inputs in [0, 1].

lenet5     conv-relu-maxpool x2, fc-relu x2, fc                      (no BN)
convbn     three conv-BN-ReLU stages, max pools, global average pool, fc
dscnn      conv-BN-ReLU6 stem, four depthwise-separable blocks (dw-BN-ReLU6, pw-BN-ReLU6), GAP, fc
mbv2       MobileNetV2-like: inverted residual blocks (expand-BN-ReLU6, dw-BN-ReLU6, project-BN),
           residual adds where stride 1 and widths match, 1x1 head conv, GAP, fc
outlier    conv-relu net without BN; after training, `add_outlier_channels` multiplies a few conv
           output channels by 30-60 and divides the next layer's input weights by the same factor,
           which leaves the float function unchanged (ReLU, max pool and average pool are positively
           homogeneous) but gives those activations a few channels far wider than the rest: the case
           where a per-tensor min/max range wastes most of the int8 levels.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def lenet5() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 6x14x14
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16x5x5
        nn.Flatten(),
        nn.Linear(400, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def conv_bn(
    cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = nn.ReLU
) -> list[nn.Module]:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return layers + ([act()] if act is not None else [])


def convbn() -> nn.Module:
    return nn.Sequential(
        *conv_bn(1, 16),
        nn.MaxPool2d(2),  # 16x14x14
        *conv_bn(16, 32),
        nn.MaxPool2d(2),  # 32x7x7
        *conv_bn(32, 64),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def _ds_block(cin: int, cout: int, stride: int) -> list[nn.Module]:
    return [*conv_bn(cin, cin, 3, stride, groups=cin, act=nn.ReLU6), *conv_bn(cin, cout, 1, act=nn.ReLU6)]


def dscnn() -> nn.Module:
    return nn.Sequential(
        *conv_bn(1, 32, 3, 2, act=nn.ReLU6),  # 32x14x14
        *_ds_block(32, 64, 1),
        *_ds_block(64, 64, 2),  # 64x7x7
        *_ds_block(64, 64, 1),
        *_ds_block(64, 64, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.body = nn.Sequential(
            *conv_bn(cin, hidden, 1, act=nn.ReLU6),
            *conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
            *conv_bn(hidden, cout, 1, act=None),  # linear bottleneck
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


def mbv2() -> nn.Module:
    return nn.Sequential(
        *conv_bn(1, 16, 3, 1, act=nn.ReLU6),  # 16x28x28
        InvertedResidual(16, 16, 2, 2),  # 16x14x14
        InvertedResidual(16, 16, 1, 4),  # residual
        InvertedResidual(16, 24, 2, 4),  # 24x7x7
        InvertedResidual(24, 24, 1, 4),  # residual
        InvertedResidual(24, 32, 1, 4),
        InvertedResidual(32, 32, 1, 4),  # residual
        *conv_bn(32, 64, 1, act=nn.ReLU6),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


class OutlierNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.conv1(x)))  # 16x14x14
        x = self.pool(self.relu(self.conv2(x)))  # 32x7x7
        x = self.relu(self.conv3(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# (producer, consumer, channel, factor): channel k of the producer's output is multiplied by the factor
# and the consumer's input weights for channel k are divided by it. Two channels per activation.
OUTLIER_RESCALES: tuple[tuple[str, str, int, float], ...] = (
    ("conv1", "conv2", 3, 40.0),
    ("conv1", "conv2", 11, 55.0),
    ("conv2", "conv3", 5, 30.0),
    ("conv2", "conv3", 20, 50.0),
    ("conv3", "fc", 7, 45.0),
    ("conv3", "fc", 40, 60.0),
)


@torch.no_grad()
def add_outlier_channels(
    net: OutlierNet, producers: tuple[str, ...] | None = None, undo: bool = False
) -> None:
    """Apply OUTLIER_RESCALES in place (function preserving through ReLU, max pool and average pool): all
    of them, or those of the given producer layers; `undo` divides instead (the net before rescaling)."""
    for producer, consumer, k, factor in OUTLIER_RESCALES:
        if producers is not None and producer not in producers:
            continue
        factor = 1.0 / factor if undo else factor
        p, c = getattr(net, producer), getattr(net, consumer)
        p.weight[k] *= factor
        p.bias[k] *= factor
        c.weight[:, k] /= factor


OUTLIER_VARIANTS: dict[str, tuple[str, ...]] = {
    "plain": (),
    "outlier1": ("conv1",),
    "outlier2": ("conv1", "conv2"),
    "outlier": ("conv1", "conv2", "conv3"),
}
"""The outlier net before its rescales ("plain", trained without BatchNorm), with the rescales of one
layer, of two, and of all three (the "outlier" model train.py writes): the same float function."""


MODELS: dict[str, Callable[[], nn.Module]] = {
    "lenet5": lenet5,
    "convbn": convbn,
    "dscnn": dscnn,
    "mbv2": mbv2,
    "outlier": OutlierNet,
}
