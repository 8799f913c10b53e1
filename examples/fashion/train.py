"""Train the example's small float model on Fashion-MNIST and write the artifacts examples/fashion ships.

    .venv/bin/python examples/fashion/train.py [--out DIR] [--epochs 6] [--train-samples 50000]

The data is the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, or
$FASHION_MNIST_DIR), read by bench/fashion_mnist/fmnist.py. Training is seeded (numpy and torch, seed 0,
two CPU threads): 50,000 images, 6 epochs, about a minute on two idle cores. It writes into --out
(default: this folder):

  model.onnx                 opset 13, input "input" (N, 1, 28, 28) float32 x/255, output "logits" (N, 10),
                             N dynamic; BatchNormalization kept as nodes (Fixpoint folds them)
  calib.npz                  x: CALIB_SAMPLES train images (disjoint from the training subset), float32
  test.npz                   x, y: the first TEST_SAMPLES t10k images and their labels
  firmware/src/test_images.h FIRMWARE_IMAGES of the test images as uint8 pixels, for the firmware's main.c
  train.json                 the training record: samples, epochs, seconds, float top-1 on test.npz and t10k

The net is DS-CNN-like (depthwise-separable blocks, BatchNorm, ReLU6) with one residual add: 4,138
parameters (BatchNorm included), 16 KB of float32.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from quantcore.templating import render

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench" / "fashion_mnist"))

import fmnist  # noqa: E402  (bench/fashion_mnist: the idx reader, the data folder, the class names)
from fitting import fit  # noqa: E402  (the training loop the benchmark networks share)
from models import conv_bn  # noqa: E402

# bench/fashion_mnist/train.py (the ONNX export and its check), loaded under another name than this file's.
_spec = importlib.util.spec_from_file_location(
    "fmnist_train", HERE.parents[1] / "bench/fashion_mnist/train.py"
)
assert _spec is not None and _spec.loader is not None
bench_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_train)
check_onnx, export, predict = bench_train.check_onnx, bench_train.export, bench_train.predict

SEED = fmnist.SEED
TRAIN_SAMPLES = 50_000
CALIB_SAMPLES = 300
TEST_SAMPLES = 500
FIRMWARE_IMAGES = 8
EPOCHS = 6


class Block(nn.Module):
    """Depthwise 3x3 (BN, ReLU6) then pointwise 1x1 (BN, ReLU6); with `residual`, x + pw(dw(x)) and the
    pointwise conv linear before the add, as in MobileNetV2's bottleneck."""

    def __init__(self, cin: int, cout: int, stride: int, residual: bool = False) -> None:
        super().__init__()
        self.residual = residual and stride == 1 and cin == cout
        self.dw = nn.Sequential(*conv_bn(cin, cin, 3, stride, groups=cin, act=nn.ReLU6))
        self.pw = nn.Sequential(*conv_bn(cin, cout, 1, act=None if self.residual else nn.ReLU6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pw(self.dw(x))
        return x + y if self.residual else y


class FashionNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(1, 16, 3, 2, act=nn.ReLU6))  # 16x14x14
        self.block1 = Block(16, 32, 1)  # 32x14x14
        self.block2 = Block(32, 32, 2)  # 32x7x7
        self.block3 = Block(32, 32, 1, residual=True)  # 32x7x7
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block3(self.block2(self.block1(self.stem(x))))
        return self.fc(self.flatten(self.pool(x)))


_SUFFIX = {"BatchNormalization": ".bn", "Clip": ".relu6", "Add": ".add", "Constant": ".const"}


def readable_names(path: Path) -> None:
    """Rename the exporter's nodes and tensors (/block1/dw/dw.0/Conv, ..._output_0) after the modules:
    block1.dw (the conv), block1.dw.bn, block1.dw.relu6, block3.add, fc. Layers are named after them
    in Fixpoint's tables, reports and generated C."""
    model = onnx.load(str(path))
    graph = model.graph
    taken: set[str] = set()
    tensors: dict[str, str] = {}
    for node in graph.node:
        parts = node.name.strip("/").split("/")
        scope = [p for p in parts[:-1] if not re.fullmatch(r"\w+\.\d+", p)]
        name = base = ".".join(scope) + _SUFFIX.get(node.op_type, "")
        k = 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        taken.add(name)
        node.name = name
        for i, out in enumerate(node.output):
            if out not in {o.name for o in graph.output}:
                tensors[out] = name if len(node.output) == 1 else f"{name}.{i}"
                node.output[i] = tensors[out]
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = tensors.get(name, name)
    for info in graph.value_info:
        info.name = tensors.get(info.name, info.name)
    onnx.checker.check_model(model)
    tmp = path.with_name(path.stem + ".tmp.onnx")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: this folder)")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--train-samples", type=int, default=TRAIN_SAMPLES)
    return parser.parse_args()


def train(net: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int) -> nn.Module:
    return fit(net, x, y, epochs, lr=1e-2)


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def images_header(x: np.ndarray, y: np.ndarray) -> str:
    """A C header with the images as uint8 pixels (x * 255, exact: x is k/255) and their labels
    (templates/example/test_images.h.j2)."""
    pixels = np.rint(x.reshape(len(x), -1) * 255.0).astype(np.uint8)
    rows = pixels.reshape(len(x), -1, 28).tolist()  # 28 pixels a line, as the image's rows
    return render(
        "example/test_images.h.j2",
        class_names=list(fmnist.CLASSES),
        labels=[int(v) for v in y],
        pixels_per_image=int(pixels.shape[1]),
        images=rows,
    )


def main() -> int:
    args = parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    x, y = fmnist.load_split("train")
    perm = np.random.default_rng(SEED).permutation(len(x))
    train_idx, calib_idx = perm[: args.train_samples], perm[-CALIB_SAMPLES:]
    tx, ty = fmnist.load_split("t10k")

    net = FashionNet()
    params = sum(p.numel() for p in net.parameters())
    print(f"training the example net ({params} parameters) on {len(train_idx)} images, {args.epochs} epochs")
    start = time.perf_counter()
    train(net, x[train_idx], y[train_idx], args.epochs)
    seconds = time.perf_counter() - start

    out = args.out
    (out / "firmware" / "src").mkdir(parents=True, exist_ok=True)
    export(net, out / "model.onnx")
    readable_names(out / "model.onnx")
    onnx_diff = check_onnx(out / "model.onnx", net, tx[:256])
    save_npz(out / "calib.npz", x=x[calib_idx])
    save_npz(out / "test.npz", x=tx[:TEST_SAMPLES], y=ty[:TEST_SAMPLES])
    header = images_header(tx[:FIRMWARE_IMAGES], ty[:FIRMWARE_IMAGES])
    (out / "firmware" / "src" / "test_images.h").write_text(header)

    top1_test = float((predict(net, tx[:TEST_SAMPLES]).argmax(1) == ty[:TEST_SAMPLES]).mean())
    top1_t10k = float((predict(net, tx).argmax(1) == ty).mean())
    record = {
        "parameters": params,
        "train_samples": len(train_idx),
        "epochs": args.epochs,
        "seed": SEED,
        "train_seconds": round(seconds, 1),
        "calib_samples": CALIB_SAMPLES,
        "test_samples": TEST_SAMPLES,
        "top1_float_test_npz": top1_test,
        "top1_float_t10k": top1_t10k,
        "onnx_opset": 13,
        "onnx_vs_torch_max_abs": onnx_diff,
        "torch": torch.__version__,
    }
    (out / "train.json").write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{seconds:.0f} s; float top-1 {100 * top1_test:.2f}% on test.npz ({TEST_SAMPLES} images),"
        f" {100 * top1_t10k:.2f}% on t10k; onnx vs torch {onnx_diff:.2g}"
    )
    for name in ("model.onnx", "calib.npz", "test.npz", "firmware/src/test_images.h"):
        print(f"  {out / name}: {(out / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
