"""Train the recurrent example: an LSTM reading each Fashion-MNIST image as a sequence of 28 rows.

    .venv/bin/python examples/fashion_lstm/train.py [--out DIR] [--epochs 3] [--train-samples 15000]

The data is the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, or
$FASHION_MNIST_DIR), read by bench/fashion_mnist/fmnist.py, with the benchmark's splits (the training
subset, and the calibration pool disjoint from it). Training is seeded (numpy and torch, seed 0, two CPU
threads). It writes into --out (default: this folder):

  model.onnx   torch.onnx.export's default (dynamo) export, weights inline: input "x" (1, 28, 28) float32
               x/255, one image's 28 rows of 28 pixels; output (1, 10) logits
  calib.npz    x: CALIB_SAMPLES images of the calibration pool, (N, 28, 28) float32
  test.npz     x, y: the first TEST_SAMPLES t10k images and their labels
  train.json   the training record: samples, epochs, seconds, float top-1 on test.npz and t10k

The net: torch.nn.LSTM(28, HIDDEN, batch_first=True) over the rows, every step's hidden state
flattened into one Linear(28 * HIDDEN, 10) (Fixpoint maps no slice of the last step yet).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench" / "fashion_mnist"))

import fmnist  # noqa: E402  (bench/fashion_mnist: the idx reader, the data folder, the splits)
from fitting import fit  # noqa: E402  (the training loop the benchmark networks share)

HIDDEN = 32
STEPS = ROWS = 28
TRAIN_SAMPLES = 15_000
CALIB_SAMPLES = 200
TEST_SAMPLES = 300
EPOCHS = 3
LEARNING_RATE = 0.01


class RowLstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(ROWS, HIDDEN, batch_first=True)
        self.fc = nn.Linear(STEPS * HIDDEN, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.fc(y.reshape(x.shape[0], -1))  # type: ignore[no-any-return]


@torch.no_grad()
def predict(net: nn.Module, x: np.ndarray) -> np.ndarray:
    return np.concatenate([net(torch.from_numpy(x[s : s + 1000])).numpy() for s in range(0, len(x), 1000)])


def export(net: nn.Module, path: Path) -> None:
    torch.onnx.export(net, (torch.zeros(1, STEPS, ROWS),), str(path), external_data=False)


def check_onnx(path: Path, net: nn.Module, x: np.ndarray) -> float:
    """The largest |onnxruntime - torch| over `x`, one image at a time (the export has batch 1)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    got = np.concatenate([session.run(None, {name: x[i : i + 1]})[0] for i in range(len(x))])
    return float(np.abs(got - predict(net, x)).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--train-samples", type=int, default=TRAIN_SAMPLES)
    args = parser.parse_args(argv)
    torch.manual_seed(fmnist.SEED)
    torch.set_num_threads(2)
    x, y = fmnist.load_split("train")
    train, calib = fmnist.train_and_calib_indices(len(x))
    train = train[: args.train_samples]
    rows = x[:, 0]  # (N, 28, 28): each image's rows are the sequence
    tx, ty = fmnist.load_split("t10k")
    net = RowLstm()
    start = time.perf_counter()
    fit(net, rows[train], y[train], args.epochs, LEARNING_RATE)
    seconds = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    export(net, args.out / "model.onnx")
    test_x, test_y = tx[:TEST_SAMPLES, 0], ty[:TEST_SAMPLES]
    np.savez_compressed(args.out / "calib.npz", x=rows[calib[:CALIB_SAMPLES]])
    np.savez_compressed(args.out / "test.npz", x=test_x, y=test_y)
    record = {
        "parameters": sum(p.numel() for p in net.parameters()),
        "train_samples": len(train),
        "epochs": args.epochs,
        "seed": fmnist.SEED,
        "train_seconds": round(seconds, 1),
        "calib_samples": CALIB_SAMPLES,
        "test_samples": TEST_SAMPLES,
        "top1_float_test_npz": float((predict(net, test_x).argmax(1) == test_y).mean()),
        "top1_float_t10k": float((predict(net, tx[:, 0]).argmax(1) == ty).mean()),
        "onnx_vs_torch_max_abs": check_onnx(args.out / "model.onnx", net, test_x[:64]),
        "torch": torch.__version__,
    }
    (args.out / "train.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
