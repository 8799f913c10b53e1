"""`fixpoint generate` as a user runs it: from options or fixpoint.toml, safe to rerun, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantcore import cli
from tests.targets.models import write_maxpool_project


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A firmware folder with the maxpool model, its params and a fixpoint.toml naming them."""
    monkeypatch.chdir(tmp_path)
    write_maxpool_project(tmp_path)
    (tmp_path / "fixpoint.toml").write_text(
        'model = "maxpool.onnx"\nparams = "maxpool.params.json"\ngenerated = "src/model"\n'
        'target = "qemu-m55"\nalignment = 32\n'
    )
    return tmp_path


def test_generate_takes_its_settings_from_fixpoint_toml(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "generate", "--json")
    report = json.loads(out)
    assert code == 0, out
    assert (
        report["core"] == "cortex-m55" and report["output"] == "src/model"
    )  # as fixpoint.toml says, relative to it
    assert [(Path(f["path"]).name, f["outcome"]) for f in report["files"]] == [
        ("model.h", "created"), ("model.c", "created"), ("model_data.c", "created"),
    ]  # fmt: skip
    # Two 2x2x... pools on a 4x4x2 input: 32 + 8 + 2 bytes of activations, and an arena that reuses them.
    assert report["layers"] == 2 and report["activation_bytes"] == 42 and report["arena_bytes"] == 64
    header = (project / "src/model/model.h").read_text()
    assert "#define MODEL_ALIGNMENT 32" in header and "core cortex-m55" in header


def test_a_second_run_reports_every_file_unchanged(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "generate")[0] == 0
    code, out, _ = _run(capsys, "generate")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[:3]] == ["unchanged"] * 3
    assert "2 layers for cortex-m55: arena 64 B (activations 42 B unshared)" in out


def test_the_model_defaults_to_the_one_the_params_json_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, params = write_maxpool_project(tmp_path)
    code, out, err = _run(capsys, "generate", "--params", str(params), "-o", "gen", "--core", "cortex-m7")
    assert code == 0, err
    assert "(sha256 " in (tmp_path / "gen/model.c").read_text() and "for cortex-m7" in out


def test_a_hand_edit_is_refused_with_exit_2_then_forced_with_a_backup(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "generate")[0] == 0
    model_c = Path("src/model/model.c")  # paths print as the project gives them
    model_c.write_text(model_c.read_text() + "/* my fix */\n")
    code, out, err = _run(capsys, "generate", "--json")
    assert code == 2 and json.loads(out)["kind"] == "HandEditedError"
    assert f"{model_c}: changed since Fixpoint generated it" in err and "--force" in err
    assert model_c.read_text().endswith("/* my fix */\n")
    code, out, _ = _run(capsys, "generate", "--force")
    assert code == 0 and f"replaced  {model_c} (old file kept as {model_c}.bak)" in out
    assert Path(f"{model_c}.bak").read_text().endswith("/* my fix */\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "--core", "cortex-a53"], "cortex-a53"),
        (["generate", "--params", "missing.json", "--model", "maxpool.onnx"], "missing.json does not exist"),
        (["generate", "--alignment", "12"], "alignment"),
    ],
)
def test_bad_options_exit_2_naming_what_is_wrong(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err, err
    assert not (project / "src").exists()
