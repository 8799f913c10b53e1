"""The generated files are one set: replaced all together or not at all, and a mixed set does not build.

Once, a write that failed after model.h and model.c were replaced left model_data.c from the previous
parameters, each file still passing its own hash check. Here the failure is real: `fixpoint generate`
runs with a file-size limit (RLIMIT_FSIZE) that lets the small files through and stops the weights file.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore.codegen.files import read_header
from tests import needs
from tests.onnx_models import small_cnn

NAMES = ("model.h", "model.c", "model_data.c")


def _generation(text: str) -> str | None:
    header = read_header(text)
    return header.generation if header else None


def _params(folder: Path, model: Path, seed: int) -> Path:
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.quantize import params_json

    x = np.random.default_rng(seed).normal(size=(8, 1, 16, 16)).astype(np.float32) * (1 + seed)
    document = pipeline.quantize(
        pipeline.load_model(model), DataSet(x), pipeline.QuantizeOptions(pool_as_depthwise=False)
    ).document
    path = folder / f"p{seed}.params.json"
    params_json.write(path, document)
    return path


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("sets")
    model = folder / "small.onnx"
    onnx.save(small_cnn(batch=1), model)
    return model, _params(folder, model, 0), _params(folder, model, 1)


def _generate(
    model: Path, params: Path, out: Path, file_limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    # Arrays padded to 1 KiB make the weights file the largest of the three (written last).
    command = [sys.executable, "-m", "quantcore.cli", "generate", "--params", str(params),
               "--model", str(model), "-o", str(out), "--alignment", "1024"]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=limit, check=False)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_write_that_fails_midway_leaves_the_whole_old_set(
    two_sets: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, first, second = two_sets
    out = tmp_path / "model"
    assert _generate(model, first, out).returncode == 0
    before = _snapshot(out)
    sizes = {name: len(data) for name, data in before.items()}
    assert sizes["model_data.c"] > max(sizes["model.h"], sizes["model.c"])
    # The new model.h and model.c fit under the limit, the new weights file does not.
    limit = max(sizes["model.h"], sizes["model.c"]) + 512
    done = _generate(model, second, out, file_limit=limit)
    assert done.returncode == 1, done.stderr
    assert "model_data.c: cannot write (File too large); nothing was changed" in done.stderr
    assert "Traceback" not in done.stderr
    assert _snapshot(out) == before  # the old set, whole; no temp file left behind


def test_a_successful_run_replaces_all_three_with_one_generation(
    two_sets: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, first, second = two_sets
    out = tmp_path / "model"
    assert _generate(model, first, out).returncode == 0
    old = {name: _generation((out / name).read_text()) for name in NAMES}
    assert _generate(model, second, out).returncode == 0
    new = {name: _generation((out / name).read_text()) for name in NAMES}
    assert len(set(old.values())) == 1 and len(set(new.values())) == 1
    assert set(old.values()) != set(new.values())
    assert sorted(p.name for p in out.iterdir()) == sorted(NAMES)


@needs.tool("gcc")
def test_files_from_two_runs_do_not_compile_together(
    two_sets: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    from quantcore.targets import cmsis_nn

    try:
        include = cmsis_nn.locate(None).path / "Include"
    except cmsis_nn.CmsisNnNotFound as exc:
        needs.absent(f"needs CMSIS-NN's headers: {exc}")
    model, first, second = two_sets
    old, mixed = tmp_path / "old", tmp_path / "mixed"
    assert _generate(model, first, old).returncode == 0
    assert _generate(model, second, mixed).returncode == 0

    def compile_data() -> subprocess.CompletedProcess[str]:
        command = ["gcc", "-fsyntax-only", f"-I{include}", f"-I{mixed}", str(mixed / "model_data.c")]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    assert compile_data().returncode == 0
    shutil.copy(old / "model_data.c", mixed / "model_data.c")  # a copy by hand from the older run
    failed = compile_data()
    assert failed.returncode != 0
    assert (
        "model.h comes from another run of fixpoint generate than this file: regenerate all three"
        in failed.stderr
    )


def test_the_editor_flags_a_file_from_another_run(
    two_sets: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from quantcore import cli

    model, first, second = two_sets
    old, mixed = tmp_path / "old", tmp_path / "mixed"
    assert _generate(model, first, old).returncode == 0
    assert _generate(model, second, mixed).returncode == 0
    shutil.copy(old / "model_data.c", mixed / "model_data.c")
    header = _generation((mixed / "model.h").read_text())
    stray = _generation((mixed / "model_data.c").read_text())
    capsys.readouterr()
    cli.main(["check", str(mixed), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)
    mixed_findings = [f for f in findings if "another run" in f["message"]]
    assert [(f["file"], f["line"], f["code"], f["message"]) for f in mixed_findings] == [
        (
            "model_data.c", 8, "stale-generated",
            f"model_data.c comes from another run of fixpoint generate than model.h (generation {stray}, not"
            f" {header}): the build stops at its #error; regenerate all of them",
        )
    ]  # fmt: skip
