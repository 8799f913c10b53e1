"""Train the benchmark's five networks on Fashion-MNIST (CPU, seeded) and export each to ONNX.

    python bench/fashion_mnist/train.py [--out DIR] [--models lenet5 convbn ...] [--epochs 4] [--retrain]

Writes into --out (default $XDG_CACHE_HOME/fixpoint/bench/fashion_mnist, never the repository):
  MODEL.onnx     opset 13, input "input" (N, 1, 28, 28) float32 x/255, output "logits" (N, 10); N dynamic;
                 BatchNormalization kept as nodes (not fused by the exporter)
  MODEL.pt       the state_dict (for PyTorch PT2E quantization; read back with weights_only=True)
  MODEL.json     training record: epochs, samples, seconds, float top-1 on t10k
  calib_100.npz, calib_1000.npz (x, from the train split, disjoint from the training subset), test.npz
A model whose .onnx and .pt exist is not retrained (--retrain forces it). The outlier net gets its
channel rescales after training; the script asserts they leave the float outputs unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import fmnist
import numpy as np
import torch
from fitting import fit
from models import MODELS, OutlierNet, add_outlier_channels
from torch import nn

OPSET = 13
# Rescaling multiplies channels by up to 60 and divides by the same factor downstream; in float32 the
# products round differently, so outputs differ by a few ulps of the logits' magnitude (~1e-5), not zero.
RESCALE_TOLERANCE = 1e-4


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--retrain", action="store_true", help="train even when the .onnx exists")
    return parser.parse_args()


def train(name: str, x: np.ndarray, y: np.ndarray, epochs: int) -> nn.Module:
    torch.manual_seed(fmnist.SEED)
    return fit(MODELS[name](), x, y, epochs, lr=3e-3, label=f"{name} ")


@torch.no_grad()
def predict(net: nn.Module, x: np.ndarray) -> np.ndarray:
    return np.concatenate([net(torch.from_numpy(x[s : s + 1000])).numpy() for s in range(0, len(x), 1000)])


@torch.no_grad()
def channel_ranges(net: OutlierNet, x: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel max of each ReLU output (conv1..conv3), to show the outlier channels."""
    out, h = {}, torch.from_numpy(x)
    for conv in ("conv1", "conv2", "conv3"):
        h = net.relu(getattr(net, conv)(h))
        out[conv] = h.amax(dim=(0, 2, 3)).numpy()
        h = net.pool(h) if conv != "conv3" else h
    return out


def rescale_outliers(net: OutlierNet, probe: np.ndarray) -> None:
    before = predict(net, probe)
    add_outlier_channels(net)
    after = predict(net, probe)
    diff = float(np.abs(after - before).max())
    scale = float(np.abs(before).max())
    print(f"  outlier rescale: max |logit diff| {diff:.3g} (logits up to {scale:.3g})")
    assert diff <= RESCALE_TOLERANCE * max(scale, 1.0), f"rescaling changed the outputs by {diff}"
    for conv, peak in channel_ranges(net, probe).items():
        top = np.argsort(peak)[::-1][:3]
        print(
            f"  {conv} channel max: median {np.median(peak):.3g}, top "
            + ", ".join(f"ch{k}={peak[k]:.3g}" for k in top)
        )


def export(net: nn.Module, path: Path) -> None:
    tmp = path.with_name(path.stem + ".tmp.onnx")
    torch.onnx.export(
        net,
        (torch.zeros(1, 1, 28, 28),),
        str(tmp),
        dynamo=False,
        opset_version=OPSET,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
        # PRESERVE (the module is in eval mode) skips the exporter's eval-mode Conv+BN fusion, so the
        # BatchNormalization nodes reach the quantizers as they do from most exporters: each folds them.
        training=torch.onnx.TrainingMode.PRESERVE,
    )
    os.replace(tmp, path)


def check_onnx(path: Path, net: nn.Module, x: np.ndarray) -> float:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    return float(np.abs(got - predict(net, x)).max())


def build(name: str, out: Path, data: dict[str, np.ndarray], epochs: int) -> None:
    start = time.perf_counter()
    net = train(name, data["x"], data["y"], epochs)
    seconds = time.perf_counter() - start
    if isinstance(net, OutlierNet):
        rescale_outliers(net, data["tx"][:1000])
    top1 = float((predict(net, data["tx"]).argmax(1) == data["ty"]).mean())
    torch.save(net.state_dict(), out / f"{name}.pt")
    export(net, out / f"{name}.onnx")
    ort_diff = check_onnx(out / f"{name}.onnx", net, data["tx"][:256])
    record = {
        "model": name,
        "epochs": epochs,
        "train_samples": len(data["x"]),
        "train_seconds": seconds,
        "top1_float_t10k": top1,
        "onnx_opset": OPSET,
        "onnx_vs_torch_max_abs": ort_diff,
    }
    (out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"  {name}: {seconds:.0f} s, float top-1 {100 * top1:.2f}% on t10k, onnx vs torch {ort_diff:.2g}")


def main() -> int:
    args = parse_args()
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    fmnist.write_arrays(args.out)
    todo = [
        m
        for m in args.models
        if args.retrain or not ((args.out / f"{m}.onnx").exists() and (args.out / f"{m}.pt").exists())
    ]
    if not todo:
        print(f"all models present in {args.out} (--retrain to train again)")
        return 0
    x, y = fmnist.load_split("train")
    train_idx, _ = fmnist.train_and_calib_indices(len(x))
    tx, ty = fmnist.load_split("t10k")
    data = {"x": x[train_idx], "y": y[train_idx], "tx": tx, "ty": ty}
    for name in todo:
        print(f"training {name} on {len(train_idx)} images, {args.epochs} epochs", flush=True)
        build(name, args.out, data, args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
