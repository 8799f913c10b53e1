"""`fixpoint qat` as users run it: one process and under torchrun (2 gloo processes), the JSON and its
fine-tuned weights read back by evaluate, and bad input refused with one clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests import needs

needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")

from quantcore import cli, pipeline  # noqa: E402
from quantcore.quantize import params_json  # noqa: E402
from tests.onnx_models import outlier_cnn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["--epochs", "2", "--batch-size", "32", "--lr", "1e-3"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qat")
    onnx.save(outlier_cnn(factor=1.0), folder / "m.onnx")
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, (256, 1, 16, 16)).astype(np.float32)
    np.savez(folder / "train.npz", x=x, y=rng.integers(0, 10, 256))
    np.save(folder / "unlabelled.npy", x)
    np.save(folder / "calib.npy", rng.uniform(0, 1, (96, 1, 16, 16)).astype(np.float32))
    return folder


def _qat(folder: Path, out: str, *extra: str) -> int:
    args = ["qat", str(folder / "m.onnx"), "--train", str(folder / "train.npz"), "--calib"]
    return cli.main([*args, str(folder / "calib.npy"), *TRAIN, *extra, "-o", str(folder / out)])


@pytest.fixture(scope="module")
def single(files: Path) -> Path:
    assert _qat(files, "one.json") == 0
    return files / "one.json"


def test_writes_the_json_and_its_weights(single: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = params_json.load(single)  # validated against the schema
    entry = document["finetuned"]
    assert entry["weights"] == "one.finetuned.npz" and (single.parent / "one.finetuned.npz").exists()
    assert (entry["epochs"], entry["batch_size"], entry["processes"], entry["loss"]) == (2, 32, 1, "distill")
    assert entry["samples"] == 256
    methods = {e.get("method") for e in document["tensors"].values() if e["kind"] == "activation"}
    assert methods == {"qat"}
    with np.load(single.parent / "one.finetuned.npz") as npz:
        names = set(npz.files)
    model = pipeline.load_model(single.parent / "m.onnx")
    weighted = [n for n in model.graph.nodes if n.op.json_name in ("conv2d", "fully_connected")]
    assert names == {name for node in weighted for name in node.inputs[1:]}


def test_evaluate_reads_the_fine_tuned_weights(single: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = single.parent
    capsys.readouterr()
    args = ["evaluate", str(folder / "m.onnx"), str(single), "--data", str(folder / "train.npz"), "--json"]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    model = pipeline.load_model(folder / "m.onnx")
    document = params_json.load(single)
    from quantcore.data import load

    direct = pipeline.evaluate(model, document, load(folder / "train.npz", (1, 1, 16, 16)), str(single))
    assert report["output_sqnr_db"] == pytest.approx(direct.output_sqnr_db, abs=0.005)  # JSON: 2 decimals


def test_changed_or_missing_weights_are_refused(single: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = single.parent
    sidecar = folder / "one.finetuned.npz"
    original = sidecar.read_bytes()
    data = ["--data", str(folder / "train.npz")]
    try:
        with np.load(sidecar) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays["fc.b"] = arrays["fc.b"] + 1
        np.savez(sidecar, **arrays)
        assert cli.main(["evaluate", str(folder / "m.onnx"), str(single), *data]) == 2  # bad input
        assert "the fine-tuned weights changed after fixpoint qat wrote them" in capsys.readouterr().err
        sidecar.unlink()
        assert cli.main(["evaluate", str(folder / "m.onnx"), str(single), *data]) == 2
        err = capsys.readouterr().err
        assert "one.finetuned.npz: cannot read the fine-tuned weights one.json was made with" in err
    finally:
        sidecar.write_bytes(original)


def test_labels_loss_needs_labels(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["qat", str(files / "m.onnx"), "--train", str(files / "unlabelled.npy"), "--loss", "labels"]
    assert cli.main([*args, "-o", str(files / "x.json")]) == 1
    err = capsys.readouterr().err
    assert "unlabelled.npy: --loss labels needs labels (an array y in the .npz); use --loss distill" in err
    assert not (files / "x.json").exists()


def test_a_batch_bigger_than_the_data_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["qat", str(files / "m.onnx"), "--train", str(files / "calib.npy"), "--batch-size", "128"]
    assert cli.main([*args, "-o", str(files / "x.json")]) == 1
    assert "calib.npy: 96 training samples do not fill one batch of 128" in capsys.readouterr().err
    assert not (files / "x.json").exists()


def test_zero_epochs_is_a_usage_error(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["qat", str(files / "m.onnx"), "--train", "t.npz", "--epochs", "0", "-o", "x.json"]) == 2
    assert "--epochs: must be greater than 0, got 0" in capsys.readouterr().err


def test_torchrun_two_processes_train_what_one_process_trains(files: Path, single: Path) -> None:
    """2 gloo processes, each on half of every global batch: the same batches and the mean gradient, so
    the same training up to float summation order (all-reduce of two half-batch means vs one mean).
    Rounding amplifies those last-bit differences - a weight on a rounding boundary rounds the other
    way and the next gradients differ - so the weights do not agree to the bit. Measured over all the
    weights (L2 of the difference / L2 of how far training moved them): 2 processes vs 1, 4 %; 1 process
    with 1 thread vs 2 threads, 4 %; another sample order (--seed 1), 170 %."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "quantcore.cli", "qat", str(files / "m.onnx"), "--train", str(files / "train.npz"),
        "--calib", str(files / "calib.npy"), *TRAIN, "-o", str(files / "two.json"),
    ]  # fmt: skip
    run = subprocess.run(command, env=env, timeout=300, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("two.json: 2 epoch(s) x 256 samples on 2 process(es)") == 1  # rank 0 only
    two, one = params_json.load(files / "two.json"), params_json.load(single)
    assert two["finetuned"]["processes"] == 2
    model = pipeline.load_model(files / "m.onnx")
    with np.load(files / "two.finetuned.npz") as a, np.load(files / "one.finetuned.npz") as b:
        assert a.files == b.files
        difference = sum(float(np.sum((a[n] - b[n]) ** 2)) for n in a.files)
        moved = sum(float(np.sum((b[n] - model.graph.constant(n)) ** 2)) for n in a.files)
    assert moved > 0
    assert np.sqrt(difference / moved) <= 0.1
    for name, entry in one["tensors"].items():
        if entry["kind"] == "activation":
            assert two["tensors"][name]["scale"] == pytest.approx(entry["scale"], rel=0.02), name


def test_training_starts_from_int8_logits_and_refuses_an_int16_output(tmp_path: Path) -> None:
    """quantize's automatic int16 output is left out (fake quantization trains none): without bias
    correction this model gets it from quantize, and QAT's start and result stay int8."""
    from quantcore.data import DataSet
    from quantcore.qat.options import QatOptions
    from quantcore.qat.train import QatTrainingError, qat

    onnx.save(outlier_cnn(factor=1.0), tmp_path / "m.onnx")
    model = pipeline.load_model(tmp_path / "m.onnx")
    calib = DataSet(np.random.default_rng(1).uniform(0, 1, (96, 1, 16, 16)).astype(np.float32), None)
    start = pipeline.QuantizeOptions(bias_correction=False)
    ptq = pipeline.quantize(model, calib, start).document
    assert ptq["tensors"]["logits"]["dtype"] == "int16"
    options = QatOptions(epochs=1, batch_size=32, samples=32, start=start)
    document = qat(model, calib, calib, options).document
    assert document is not None
    assert {e["dtype"] for e in document["tensors"].values() if e["kind"] == "activation"} == {"int8"}
    # Training starts from the int8 logits' calibrated range, not the int16 output's 4x wider one (one
    # short epoch moves a range by a few percent; the int8 export of a 4x range would keep 6 bits).
    int8 = pipeline.quantize(
        model, calib, pipeline.QuantizeOptions(bias_correction=False, int16_output=False)
    )
    start_width = np.ptp(list(int8.document["tensors"]["logits"]["range"].values()))
    width = np.ptp(list(document["tensors"]["logits"]["range"].values()))
    assert 0.8 < width / start_width < 1.25, (width, start_width)
    forced = QatOptions(start=pipeline.QuantizeOptions(int16_output=True))
    with pytest.raises(QatTrainingError, match="runs int8 only"):
        qat(model, calib, calib, forced)
