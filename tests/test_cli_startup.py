"""Start-up of the `fixpoint` CLI: building its parser imports nothing heavy, and every command but `qat`
works with torch not installed (torch is the optional extra "torch"; `qat` says how to install it).

"Torch not installed" is made real rather than mocked: the CLI runs in a child interpreter started with
-S (no site-packages of its own) whose path is a folder of links to every entry of this environment's
site-packages except torch's, so `import torch` fails as it does where the extra was never installed and
importlib.util.find_spec("torch") is None. Everything else (numpy, onnx, onnxruntime, the editable
install of this repository, the entry points) is the same installation the other tests use.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli
from quantcore.errors import TORCH_MISSING, CmsisNnNotFound
from quantcore.kernels.requantize import Rounding
from tests import needs
from tests.onnx_models import small_cnn

REPO = Path(__file__).resolve().parents[1]
BROKEN = REPO / "examples" / "broken"
TORCH_ENTRIES = re.compile(r"(torch|torchgen|functorch)([-.].*)?\Z")
"""The top-level entries of site-packages that the torch wheel installs."""
HEAVY = ("numpy", "torch", "onnx", "onnxruntime", "jinja2", "PIL", "numba")
COMMANDS = (
    "conformance", "cmsis-nn", "quantize", "evaluate", "sensitivity", "qat", "generate", "build",
    "verify", "flash-verify", "report", "check", "lsp",
)  # fmt: skip
TIMEOUT = 600


Runner = tuple[list[str], dict[str, str]]
"""The interpreter command line that starts the CLI, and its environment."""


def _environment(path: list[str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FIXPOINT_DEBUG", "COLUMNS")}
    env["COLUMNS"] = "100"  # argparse wraps help to the terminal: the same width in both runs
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def _site_without_torch(folder: Path) -> list[str]:
    """A module path with this environment's packages but not torch: `folder` holds a link to every
    entry of site-packages except torch's; the paths the .pth files add (the editable install of this
    repository) follow it, as site.py would add them."""
    folder.mkdir()
    path = [str(folder)]
    for site in dict.fromkeys((sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])):
        for entry in sorted(Path(site).iterdir()):
            if TORCH_ENTRIES.match(entry.name) or (folder / entry.name).exists():
                continue
            if entry.suffix == ".pth":
                lines = entry.read_text().splitlines()
                path += [
                    str(Path(site, line)) for line in lines if line and not line.startswith(("#", "import"))
                ]
            (folder / entry.name).symlink_to(entry)
    return path


@pytest.fixture(scope="module")
def with_torch() -> Runner:
    return [sys.executable, "-m", "quantcore.cli"], _environment()


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    path = _site_without_torch(tmp_path_factory.mktemp("no-torch") / "site-packages")
    env = _environment(path)
    probe = (
        "import importlib.util, numpy, onnx, onnxruntime, quantcore; print(importlib.util.find_spec('torch'))"
    )
    found = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert (found.returncode, found.stdout) == (0, "None\n"), found.stderr
    return [sys.executable, "-S", "-m", "quantcore.cli"], env


def fixpoint(runner: Runner, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command, env = runner
    return subprocess.run(
        [*command, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small float CNN and its calibration samples."""
    root = tmp_path_factory.mktemp("model")
    onnx.save(small_cnn(batch=1), root / "cnn.onnx")
    x = np.random.default_rng(1).uniform(0, 1, (32, 1, 16, 16)).astype(np.float32)
    np.savez(root / "calib.npz", x=x)
    return root / "cnn.onnx", root / "calib.npz"


def test_help_lists_every_command_without_torch(
    with_torch: Runner, without_torch: Runner, tmp_path: Path
) -> None:
    shown = fixpoint(without_torch, "--help", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stderr == ""
    listed = re.findall(r"^    (\S+)\s", shown.stdout, re.MULTILINE)
    assert listed == list(COMMANDS)
    assert shown.stdout == fixpoint(with_torch, "--help", cwd=tmp_path).stdout


def test_check_finds_the_same_without_torch(
    with_torch: Runner, without_torch: Runner, tmp_path: Path
) -> None:
    runs = [
        fixpoint(r, "check", str(BROKEN), "--format", "json", cwd=tmp_path)
        for r in (with_torch, without_torch)
    ]
    found = [json.loads(run.stdout) for run in runs]
    assert [run.returncode for run in runs] == [1, 1] and runs[0].stderr == runs[1].stderr
    assert found[0] == found[1]
    assert any(f["severity"] == "error" for f in found[1])  # the seeded mistakes (tests/examples: which)


def test_quantize_generate_and_verify_without_torch(
    without_torch: Runner, model: tuple[Path, Path], tmp_path: Path
) -> None:
    onnx_file, calib = model
    params = tmp_path / "cnn.params.json"
    quantized = fixpoint(
        without_torch, "quantize", str(onnx_file), "--calib", str(calib), "-o", str(params), cwd=tmp_path
    )
    assert quantized.returncode == 0, quantized.stderr
    last = quantized.stdout.splitlines()[-1]
    how = r"7 layers quantized from 32 samples \(minmax, per-channel[^)]*\) in [0-9.]+ s"
    assert re.fullmatch(rf"{re.escape(str(params))}: {how}", last), last
    out = tmp_path / "generated"
    model_options = ["--model", str(onnx_file), "--params", str(params)]
    generated = fixpoint(without_torch, "generate", *model_options, "-o", str(out), "--json", cwd=tmp_path)
    assert generated.returncode == 0, generated.stderr
    written = json.loads(generated.stdout)
    assert sorted(Path(f["path"]).name for f in written["files"]) == ["model.c", "model.h", "model_data.c"]
    assert {f["outcome"] for f in written["files"]} == {"created"} and written["layers"] == 8
    try:
        from quantcore.targets import cmsis_nn

        cmsis_nn.locate()
    except CmsisNnNotFound as exc:
        needs.absent(f"verify needs a CMSIS-NN checkout, none found: {exc}")
    options = ["--src", str(out), "--build-dir", str(tmp_path / "build"), "--cases", "2", "--json"]
    verified = fixpoint(without_torch, "verify", "--target", "host", *model_options, *options, cwd=tmp_path)
    report = json.loads(verified.stdout)
    assert verified.returncode == 0 and report["verdict"] == "pass", verified.stderr
    assert report["mismatched_bytes_total"] == 0 and report["cases"] == 2


def test_qat_without_torch_says_how_to_install_it(
    without_torch: Runner, model: tuple[Path, Path], tmp_path: Path
) -> None:
    onnx_file, calib = model
    params = tmp_path / "qat.params.json"
    run = fixpoint(
        without_torch, "qat", str(onnx_file), "--train", str(calib), "-o", str(params), cwd=tmp_path
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == f"fixpoint qat: {TORCH_MISSING}\n"
    assert TORCH_MISSING.endswith("pip install 'fixpoint[torch]'") and not params.exists()


def test_the_torch_importer_without_torch_says_how_to_install_it(
    without_torch: Runner, tmp_path: Path
) -> None:
    """PyTorch models reach Fixpoint through the Python API (quantcore.importers), not a CLI option."""
    (tmp_path / "weights.pt").write_bytes(b"\0" * 16)
    code = (
        "from quantcore.errors import ModelError\n"
        "from quantcore.importers import load_torch_checkpoint\n"
        "try:\n    load_torch_checkpoint('weights.pt')\nexcept ModelError as e:\n    print(e)\n"
    )
    command, env = without_torch
    python = command[:2]  # the interpreter and -S, without "-m quantcore.cli"
    run = subprocess.run(
        [*python, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert (run.stdout, run.stderr) == (f"torch: {TORCH_MISSING}\n", "")


@pytest.mark.parametrize(
    ("what", "scans"),
    [
        ("cli.build_parser()", True),
        ("cli.main(['--help'])", True),
        ("cli.main(['check', '--help'])", True),
        ("cli.main(['lsp', '--help'])", True),
        *[(f"cli.main([{name!r}, '--help'])", False) for name in COMMANDS if name not in ("check", "lsp")],
    ],
)
def test_building_the_parser_imports_nothing_heavy(what: str, scans: bool, tmp_path: Path) -> None:
    """Behaviour, not timing: the modules loaded once the parser is built or a help printed. The
    entry-point scan (importlib.metadata) happens only where a plugin's command may be asked for."""
    code = (
        "import contextlib, io, json, sys\nfrom quantcore import cli\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    {what}\n"
        f"print(json.dumps(sorted(m for m in {(*HEAVY, 'importlib.metadata')!r} if m in sys.modules)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=_environment(), cwd=tmp_path, capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == (["importlib.metadata"] if scans else [])


def test_check_never_loads_numba(tmp_path: Path) -> None:
    """`fixpoint check` (the language server's rules, run by the CLI) checks a firmware tree without the
    compiled loops' JIT: numba is imported only where evaluate's kernels run (quantcore.kernels.jit)."""
    code = (
        "import contextlib, io, sys\nfrom quantcore import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    status = cli.main(['check', {str(BROKEN)!r}])\n"
        "print(status, 'numba' in sys.modules, 'llvmlite' in sys.modules)"
    )
    env = _environment([str(REPO), str(REPO / "server")])  # this checkout's quantcore
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert run.stdout.split() == ["1", "False", "False"], run.stderr


def test_a_plugin_command_is_found_after_debug(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.asked_command(["--debug", "check", "."]) == "check"
    assert cli.asked_command(["--help", "quantize"]) is None and cli.asked_command([]) is None
    assert cli.main(["--debug", "check", "--list-rules"]) == 0
    assert "unscaled-bias" in capsys.readouterr().out


def test_an_unknown_command_lists_the_plugins_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["quantise"]) == 2
    names = ", ".join(repr(name) for name in COMMANDS)
    choice = f"invalid choice: 'quantise' (choose from {names})"
    assert capsys.readouterr().err == f"fixpoint: argument COMMAND: {choice} (see fixpoint --help)\n"


def test_the_rounding_choices_are_the_kernels() -> None:
    """The CLI's --rounding takes its choices from quantcore.kernels.rounding (numpy-free): the same enum."""
    from quantcore.kernels import rounding

    assert rounding.Rounding is Rounding and [r.value for r in Rounding] == ["double", "single"]
