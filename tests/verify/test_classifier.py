"""Top-1 and arg-max agreement only where they mean something (issue 18): for a classifier - one output,
one vector of K >= 2 class scores per sample - and not for an autoencoder, in `evaluate` (text and JSON),
`sensitivity` and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from quantcore.cli import main
from quantcore.verify.metrics import classifier_classes
from quantcore.verify.report import NOT_A_CLASSIFIER, EvaluationReport
from tests.importers.models import model, value
from tests.onnx_models import small_cnn

SAMPLES = 16
CLASSIFIER_KEYS = {"top1_float", "top1_int8", "top1_drop_points", "agreement"}


@pytest.mark.parametrize(
    ("shapes", "classes"),
    [
        ([(1, 10)], 10),  # logits or Softmax probabilities
        ([(1, 1, 1, 10)], 10),  # size-1 axes aside
        ([(1, 10, 1, 1)], 10),
        ([(1, 2)], 2),
        ([(1, 1)], None),  # one value per sample: a regression
        ([(1,)], None),
        ([(1, 16, 16, 1)], None),  # an image: an autoencoder, a segmentation map
        ([(1, 4, 10)], None),  # a sequence of scores
        ([(1, 10), (1, 4)], None),  # several outputs (a detector's heads)
    ],
)
def test_the_classifier_rule(shapes: list[tuple[int, ...]], classes: int | None) -> None:
    assert classifier_classes(shapes) == classes


def _autoencoder() -> onnx.ModelProto:
    """Conv 1->4, ReLU, Conv 4->1: a 16 x 16 image in, a 16 x 16 image out."""
    rng = np.random.default_rng(2)
    inits = {
        "w1": rng.normal(0, 0.4, (4, 1, 3, 3)).astype(np.float32),
        "w2": rng.normal(0, 0.4, (1, 4, 3, 3)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["h"], name="encode", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["hr"], name="relu"),
        helper.make_node("Conv", ["hr", "w2"], ["y"], name="decode", pads=[1, 1, 1, 1]),
    ]
    return model(nodes, [value("x", [1, 1, 16, 16])], [value("y", [1, 1, 16, 16])], inits, 13)


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, Path]]:
    """Per model: (model, params, labelled data)."""
    root = tmp_path_factory.mktemp("classifier")
    rng = np.random.default_rng(9)
    data = root / "data.npz"
    np.savez(
        data, x=rng.uniform(0, 1, (SAMPLES, 1, 16, 16)).astype(np.float32), y=rng.integers(0, 10, SAMPLES)
    )
    out = {}
    for name, proto in (("cnn", small_cnn()), ("autoencoder", _autoencoder())):
        path, params = root / f"{name}.onnx", root / f"{name}.json"
        onnx.save(proto, path)
        assert main(["quantize", str(path), "--calib", str(data), "-o", str(params)]) == 0
        out[name] = (path, params, data)
    return out


def _evaluate(project: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    path, params, data = project
    capsys.readouterr()
    assert main(["evaluate", str(path), str(params), "--data", str(data), *extra]) == 0
    return capsys.readouterr().out


def test_evaluate_reports_top1_and_agreement_for_a_classifier(
    projects: dict[str, tuple[Path, Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads(_evaluate(projects["cnn"], capsys, "--json"))
    assert report["classifier"] is True and report.keys() >= CLASSIFIER_KEYS
    # Random labels: top-1 means nothing here (1/16 measured); the int8 model agrees with the float one on
    # 16 of 16 images, and one flip covers a near-tie on another CPU's float kernels.
    assert 0 <= report["top1_float"] <= 1 and 15 / 16 <= report["agreement"] <= 1
    text = _evaluate(projects["cnn"], capsys)
    assert "top-1: float " in text and "agreement float/int8: " in text and NOT_A_CLASSIFIER not in text


def test_evaluate_leaves_them_out_for_an_autoencoder(
    projects: dict[str, tuple[Path, Path, Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Labels given or not: the arg-max over an image's pixels names no class."""
    written = tmp_path / "e.json"
    report = json.loads(_evaluate(projects["autoencoder"], capsys, "--json", "--report-json", str(written)))
    assert report["classifier"] is False and not CLASSIFIER_KEYS & report.keys()  # absent, not null
    assert report["output_sqnr_db"] > 40 and report["nonfinite"] == {}  # 43.28 dB measured
    assert json.loads(written.read_text()) == report
    back = EvaluationReport.from_json(written.read_text())
    assert (back.classifier, back.agreement, back.top1_float, back.top1_drop_points) == (
        False,
        None,
        None,
        None,
    )
    lines = _evaluate(projects["autoencoder"], capsys).splitlines()
    summary = lines[lines.index(next(line for line in lines if line.startswith("model: "))) :]
    assert summary[1] == NOT_A_CLASSIFIER
    assert summary[1] == (
        "top-1, agreement: not measured (not a classifier: its output is not one vector of class scores"
        " per sample)"
    )
    assert summary[2].startswith("output SQNR: ") and not any(
        "agreement float/int8" in line for line in lines
    )


def test_the_report_says_not_a_classifier(
    projects: dict[str, tuple[Path, Path, Path]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summaries = {}
    for name in ("cnn", "autoencoder"):
        written = tmp_path / f"{name}.json"
        _evaluate(projects[name], capsys, "--report-json", str(written))
        assert main(["report", "--evaluation", str(written), "--json"]) == 0
        summaries[name] = json.loads(capsys.readouterr().out)["summary"]
    assert summaries["cnn"]["classifier"] is True and summaries["cnn"]["agreement"] is not None
    assert summaries["autoencoder"]["classifier"] is False
    assert [summaries["autoencoder"][key] for key in sorted(CLASSIFIER_KEYS)] == [None] * 4
    html = tmp_path / "autoencoder.html"
    assert main(["report", "--evaluation", str(tmp_path / "autoencoder.json"), "-o", str(html)]) == 0
    assert "not a classifier: no top-1 or agreement" in html.read_text()


def test_sensitivity_ranks_an_autoencoder_by_sqnr_alone(
    projects: dict[str, tuple[Path, Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    """No top-1 drop and no gradient ranking (its cross-entropy would be on the brightest pixel), though
    labels are given and torch is installed; the classifier keeps both."""
    path, params, data = projects["autoencoder"]
    capsys.readouterr()
    assert main(["sensitivity", str(path), str(params), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["classifier"] is False and set(report["ranking"]) == {"sqnr"}
    assert all(layer["top1_drop_points"] is None and layer["gradient"] is None for layer in report["layers"])
    assert main(["sensitivity", str(path), str(params), "--data", str(data)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["rank", "layer", "op", "SQNR", "alone", "dB", "s16"]
    assert table[-1] == (
        "not a classifier (its output is not one vector of class scores per sample): no top-1 drop, no"
        " gradient ranking"
    )
    path, params, data = projects["cnn"]
    assert main(["sensitivity", str(path), str(params), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["classifier"] is True and set(report["ranking"]) == {"sqnr", "gradient", "gradient_noise"}
    assert all(layer["top1_drop_points"] is not None for layer in report["layers"])


def test_a_report_keeps_the_rule() -> None:
    fields = {"model": "m", "params_file": "p", "samples": 1, "output_sqnr_db": 30.0, "layers": []}
    with pytest.raises(ValueError, match="a classifier has an arg-max agreement"):
        EvaluationReport(top1_float=None, top1_int8=None, agreement=None, **fields)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a classifier has an arg-max agreement"):
        EvaluationReport(top1_float=None, top1_int8=None, agreement=1.0, classifier=False, **fields)  # type: ignore[arg-type]


def test_a_report_written_before_the_key_reads_as_before() -> None:
    """Evaluation JSON from an earlier Fixpoint has no "classifier": it was a classifier's when it has an
    agreement (every report then had one)."""
    old = {
        "version": 1,
        "model": "m",
        "params_file": "p",
        "samples": 4,
        "top1_float": None,
        "top1_int8": None,
    }
    old.update(top1_drop_points=None, agreement=0.75, output_sqnr_db=31.0, nonfinite={}, layers=[])
    back = EvaluationReport.from_dict(old)
    assert back.classifier is True and back.agreement == 0.75
    assert EvaluationReport.from_dict({**old, "classifier": False, "agreement": 0.75}).agreement is None
