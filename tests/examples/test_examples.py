"""The shipped examples: the fashion pipeline (make demo) within its recorded figures, its firmware tree
clean under the editor's rules and buildable with its Makefile and CMakeLists.txt, the broken tree's
exact findings, and the HTML report: self-contained, rendered from real reports, strict about input.

The pipeline runs once per module in a temporary copy of examples/fashion (nothing is written into the
repository). Without CMSIS-NN or the Arm toolchain the driver skips its target steps; the target tests
then skip with the reason and the host figures are still checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore import cli
from tests import needs

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXPECTED = json.loads((EXAMPLES / "fashion" / "expected.json").read_text())
_IGNORED = shutil.ignore_patterns("out", "build", "model", "__pycache__")  # model: firmware/src/model

BROKEN_FINDINGS = {
    ("Makefile", "kernel-opt-level"),
    ("Makefile", "missing-cmsis-nn"),
    ("src/buffers.c", "misaligned-array"),
    ("src/head.c", "missing-cmsis-nn"),
    ("src/head.c", "unscaled-bias"),
    ("src/head.c", "wrong-zero-point"),
    ("src/model/model.c", "stale-generated"),
    ("src/model/model.h", "stale-generated"),
    ("src/model/model_data.c", "stale-generated"),
}


def target_tools_missing() -> str | None:
    """Why the target steps cannot run here, or None."""
    from quantcore.errors import QuantcoreError
    from quantcore.targets import cmsis_nn

    try:
        cmsis_nn.locate(None)
    except QuantcoreError as exc:
        return f"no CMSIS-NN checkout ({exc})"
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "make"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def copy_example(dest: Path) -> Path:
    shutil.copytree(EXAMPLES / "fashion", dest, ignore=_IGNORED)
    return dest


def run_driver(
    example: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(example / "run_example.py"), *args],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    example = copy_example(tmp_path_factory.mktemp("pipeline") / "fashion")
    done = run_driver(example)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return example, done


def check_json(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code = cli.main(["check", str(path), "--format", "json"])
    out, _ = capsys.readouterr()
    findings = json.loads(out)
    assert code in (0, 1)
    return findings


# ------------------------------------------------------------------------------------ the pipeline


def test_the_pipeline_prints_every_step_and_its_commands(pipeline: tuple[Path, Any]) -> None:
    _, done = pipeline
    headers = re.findall(r"^== (\d)/7 (\w[\w-]*)", done.stdout, re.MULTILINE)
    assert [name for _, name in headers] == [
        "quantize", "evaluate", "generate", "build", "flash-verify", "summary", "report",
    ]  # fmt: skip
    for command in ("fixpoint quantize", "fixpoint evaluate", "fixpoint generate", "fixpoint report"):
        assert re.search(rf"^\$ \S*{command} ", done.stdout, re.MULTILINE), command


def test_the_host_figures_stay_within_the_recorded_ones(pipeline: tuple[Path, Any]) -> None:
    example, _ = pipeline
    evaluation = json.loads((example / "out" / "evaluation.json").read_text())
    assert evaluation["samples"] == EXPECTED["samples"]
    tolerance = EXPECTED["top1_tolerance"]
    assert abs(evaluation["top1_float"] - EXPECTED["top1_float"]) <= tolerance
    assert abs(evaluation["top1_int8"] - EXPECTED["top1_int8"]) <= tolerance
    assert evaluation["agreement"] >= EXPECTED["agreement_min"]
    assert evaluation["output_sqnr_db"] >= EXPECTED["output_sqnr_db_min"]
    worst = min(layer["sqnr_db"] for layer in evaluation["layers"] if layer["sqnr_db"] is not None)
    assert worst >= EXPECTED["layer_sqnr_db_min"]


def test_the_target_figures_stay_within_the_recorded_ones(pipeline: tuple[Path, Any]) -> None:
    reason = target_tools_missing()
    if reason:
        needs.absent(f"target steps skipped by the driver: {reason}")
    example, _ = pipeline
    verify = json.loads((example / "out" / "verify.json").read_text())
    assert verify["verdict"] == EXPECTED["verify_verdict"] and verify["mismatched_bytes_total"] == 0
    assert len(verify["layers"]) == EXPECTED["layers"]
    assert verify["arena_bytes"] == EXPECTED["arena_bytes"]
    assert verify["scratch_bytes"] == EXPECTED["scratch_bytes"]
    assert verify["flash_bytes"] <= EXPECTED["flash_bytes_max"]
    assert verify["ram_bytes"] <= EXPECTED["ram_bytes_max"]


def app_predictions(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"^image \d+: class (\d+)", text, re.MULTILINE)]


def reference_predictions(example: Path) -> list[int]:
    """The int8 reference's classes for the firmware's images, quantized as main.c does (float32)."""
    from quantcore import pipeline as qp
    from quantcore.quantize import params_json
    from quantcore.quantize.document import from_document
    from quantcore.runtime import int8_exec

    loaded = qp.load_model(example / "model.onnx")
    qgraph = from_document(loaded.graph, params_json.load(example / "out" / "fashion.params.json"))
    header = (example / "firmware" / "src" / "test_images.h").read_text()
    body = header[header.index("test_images[TEST_IMAGE_COUNT]") :]
    pixels = np.array([int(v) for v in re.findall(r"\d+", body.split("= {", 1)[1])], np.float32)
    pixels = pixels.reshape(EXPECTED["firmware_images"], 28, 28, 1)
    quant = qgraph.tensor(qgraph.inputs[0]).quant
    q = np.rint(pixels / np.float32(255.0) / np.float32(float(quant.scale))) + np.float32(
        int(quant.zero_point)
    )
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: np.clip(q, -128, 127).astype(np.int8)})
    return [int(v) for v in env[qgraph.outputs[0]].reshape(len(pixels), -1).argmax(axis=1)]


def test_the_firmware_built_with_its_makefile_classifies_like_the_reference(
    pipeline: tuple[Path, Any],
) -> None:
    reason = target_tools_missing()
    if reason:
        needs.absent(f"target steps skipped by the driver: {reason}")
    example, _ = pipeline
    text = (example / "out" / "app.txt").read_text()
    assert app_predictions(text) == reference_predictions(example)
    assert f"{EXPECTED['firmware_correct']} of {EXPECTED['firmware_images']} correct" in text


def test_the_firmware_tree_is_clean_under_the_editor_rules(
    pipeline: tuple[Path, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Checked from the example's folder, as its README runs it: firmware/fixpoint.toml reads
    # ../model.onnx, inside the folder the user works in (a copy outside any git repository).
    example, _ = pipeline
    monkeypatch.chdir(example)
    assert check_json(example / "firmware", capsys) == []  # generated, built
    fresh = copy_example(tmp_path / "fresh")
    monkeypatch.chdir(fresh)
    assert check_json(fresh / "firmware", capsys) == []  # as cloned: nothing generated yet


def test_the_firmware_builds_with_cmake_too(pipeline: tuple[Path, Any], tmp_path: Path) -> None:
    reason = target_tools_missing() or (None if shutil.which("cmake") else "cmake is not installed")
    if reason:
        needs.absent(reason)
    from quantcore.targets import cmsis_nn

    example, _ = pipeline
    build = tmp_path / "cmake"
    configure = ["cmake", "-S", str(example / "firmware"), "-B", str(build)]
    for command in (
        [*configure, f"-DCMSIS_NN={cmsis_nn.locate(None).path}"],
        ["cmake", "--build", str(build), "-j2"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    qemu = ["qemu-system-arm", "-M", "mps2-an386", "-nographic", "-monitor", "none", "-serial", "none"]
    qemu += ["-semihosting-config", "enable=on,target=native", "-kernel", str(build / "fashion.elf")]
    done = subprocess.run(qemu, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert app_predictions(done.stdout) == app_predictions((example / "out" / "app.txt").read_text())


def test_without_cmsis_nn_the_driver_names_the_install_command_and_runs_the_host_steps(
    tmp_path: Path,
) -> None:
    example = copy_example(tmp_path / "fashion")
    done = run_driver(example, env={"FIXPOINT_CMSIS_NN": str(tmp_path / "no-cmsis-nn")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "cmsis-nn install https://github.com/ARM-software/CMSIS-NN.git" in done.stdout
    assert "skipped: 4 build" in done.stdout and "5 flash-verify" in done.stdout
    assert (example / "out" / "evaluation.json").is_file() and (example / "out" / "report.html").is_file()
    assert not (example / "out" / "verify.json").exists()
    assert "NOT RUN" in (example / "out" / "report.html").read_text()


# --------------------------------------------------------------------------------- the broken tree


def test_the_broken_tree_has_exactly_its_seeded_mistakes(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["check", str(EXAMPLES / "broken"), "--format", "json"])
    out, _ = capsys.readouterr()
    findings = json.loads(out)
    assert code == 1
    assert {(f["file"], f["code"]) for f in findings} == BROKEN_FINDINGS
    zero_point = next(f for f in findings if f["code"] == "wrong-zero-point")
    assert "128" in zero_point["message"] and zero_point["severity"] == "error"


# --------------------------------------------------------------------------------------- the report


def test_the_report_is_one_self_contained_page(pipeline: tuple[Path, Any]) -> None:
    example, _ = pipeline
    page = (example / "out" / "report.html").read_text()
    assert not re.search(r"https?://", page), "the page must not reference the network"
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page, re.IGNORECASE)
    assert '<svg id="sqnr-chart"' in page
    data = json.loads((example / "out" / "report.json").read_text())
    assert page.count('<svg class="histogram"') == len(data["activations"]) >= 10
    assert all(a["histogram"]["values"] > 0 for a in data["activations"])
    for layer in data["layers"]:
        assert f'<td class="name">{layer["name"]}</td>' in page
    if target_tools_missing() is None:
        assert '<svg id="memory-chart"' in page and '<div class="verdict pass"><b>PASS</b>' in page
        assert (
            data["summary"]["verdict"] == "pass" and data["summary"]["arena_bytes"] == EXPECTED["arena_bytes"]
        )


def test_the_report_renders_from_the_evaluation_alone_and_escapes_names(
    pipeline: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example, _ = pipeline
    evaluation = json.loads((example / "out" / "evaluation.json").read_text())
    evaluation["layers"][0]["name"] = "<script>alert(1)</script>"
    evaluation["layers"][1].update(sqnr_db=None, nonfinite={"sqnr_db": "inf"})
    path = tmp_path / "evaluation.json"
    path.write_text(json.dumps(evaluation))
    code = cli.main(["report", "--evaluation", str(path), "-o", str(tmp_path / "r.html"), "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    page = (tmp_path / "r.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert (
        "NOT RUN" in page
        and '<svg id="sqnr-chart"' in page
        and '<span class="tag exact">exact</span>' in page
    )
    merged = json.loads(out)
    assert merged["summary"]["verdict"] == "not run" and merged["activations"] == []
    assert merged["layers"][1]["sqnr_db"] is None and merged["layers"][1]["nonfinite"] == {"sqnr_db": "inf"}


def test_the_report_shows_a_failed_verification_and_its_first_mismatch(
    pipeline: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example, _ = pipeline
    evaluation = json.loads((example / "out" / "evaluation.json").read_text())
    layers = [{"name": layer["name"], "bytes": 100, "mismatched_bytes": 0} for layer in evaluation["layers"]]
    first = {"case": 2, "channel": 5, "index": [0, 3, 4, 5], "expected": -7, "actual": -6}
    layers[3].update(mismatched_bytes=12, first_mismatch=first)
    memory = {"flash_bytes": 150_000, "flash_budget": 131_072, "ram_bytes": 9000, "ram_budget": 65_536}
    memory.update(arena_bytes=4000, scratch_bytes=0)
    run = {"target": "qemu-m4", "verdict": "fail", "channel": "semihosting", "cases": 3, "inputs": "x.npz"}
    verify = {**run, "layers": layers, "mismatched_bytes_total": 12, **memory}
    (tmp_path / "verify.json").write_text(json.dumps(verify))
    html = tmp_path / "r.html"
    argv = ["report", "--evaluation", str(example / "out" / "evaluation.json"), "--verify"]
    assert cli.main([*argv, str(tmp_path / "verify.json"), "-o", str(html)]) == 0
    capsys.readouterr()
    page = html.read_text()
    assert '<div class="verdict fail"><b>FAIL</b> 12 bytes differ' in page
    assert f"layer <code>{layers[3]['name']}</code>" in page
    assert "case 2, channel 5, index (0, 3, 4, 5): expected -7, got -6" in page
    assert "over budget" in page and "114.4% of 131,072 B" in page


def test_report_bad_input_is_exit_2_naming_the_file(
    pipeline: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example, _ = pipeline
    html = str(tmp_path / "r.html")
    missing = str(tmp_path / "nowhere.json")
    params = str(example / "out" / "fashion.params.json")
    not_json = tmp_path / "broken.json"
    not_json.write_text("{ nope")
    cases = [
        (["--evaluation", missing, "-o", html], "nowhere.json: does not exist"),
        (["--evaluation", str(not_json), "-o", html], "broken.json: is not JSON"),
        (["--evaluation", params, "-o", html], "not a fixpoint evaluation report"),
        (["--verify", params, "-o", html], "not a fixpoint verification report"),
        (["--params", params, "--calib", missing, "--model", str(example / "model.onnx"), "-o", html],
         "nowhere.json does not exist"),
        (["--evaluation", str(example / "out" / "evaluation.json")], "nothing to write"),
        (["--calib", missing, "-o", html], "give at least one of"),
    ]  # fmt: skip
    for argv, message in cases:
        code = cli.main(["report", *argv])
        _, err = capsys.readouterr()
        assert code == 2 and message in err, (argv, err)
    assert not Path(html).exists()
