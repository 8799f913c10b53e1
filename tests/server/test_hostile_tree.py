"""A hostile firmware tree against `fixpoint check` and the workspace index (issue 17): a FIFO named like a
source, a symlink to /dev/zero and one to a source outside the workspace, a file over the size limit, a
FIFO fixpoint.toml, 1,500 nested folders, settings and a params JSON that lead out of the workspace.

Nothing hangs (the CLI runs as a child process with a timeout, so a regression fails instead of
stalling the suite), nothing is read that must not be (a source outside the workspace would give a
finding if it were), and each is a finding saying what was skipped and why.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixpoint_server import settings
from fixpoint_server.findings import Code
from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.rules import run_rules
from fixpoint_server.rules.skipped_file import SILENCE

from quantcore import limits, untrusted
from quantcore.project import Project
from tests.server import fixtures
from tests.server.firmware_tree import make_tree

CHECK_TIMEOUT_S = 120.0
"""Far above a check of these small trees (about 2 s); past it the check hung."""
UNALIGNED_C = "static int8_t in_scratch[30]; static int8_t out_scratch[30];\n"
"""A source with two misaligned-array findings (hints: int8 scratch buffers a kernel would read through a
wider pointer), both on line 1: proof that a file was (or was not) read."""
ROOT = Path(__file__).resolve().parents[2]


def check(path: Path, *argv: str) -> tuple[int, list[str]]:
    """`fixpoint check PATH ARGV` in a child process: exit status and the lines it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "quantcore.cli", "check", str(path), *argv],
        capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def skipped_line(relative: str, problem: str) -> str:
    return f"{relative}:1:1: warning: skipped: {problem}; its checks do not run ({SILENCE}) [skipped-file]"


def problem_of(path: Path, root: Path) -> str:
    """What quantcore.untrusted says about reading `path` (the finding quotes it)."""
    with pytest.raises(untrusted.UntrustedInputError) as refused:
        untrusted.read_bytes(path, limit=limits.SOURCE_MAX_BYTES, root=root)
    return refused.value.problem


def test_a_fifo_named_like_a_source_is_a_finding_not_a_hang(small: Path) -> None:
    os.mkfifo(small / "src" / "pipe.c")
    status, lines = check(small)
    problem = problem_of(small / "src" / "pipe.c", small)
    assert "is a FIFO (named pipe), not a regular file" in problem
    assert (status, lines) == (0, [skipped_line("src/pipe.c", problem), "1 finding, 0 errors"])


def test_a_symlink_to_dev_zero_is_never_opened(small: Path) -> None:
    (small / "src" / "zero.c").symlink_to("/dev/zero")
    status, lines = check(small)
    problem = problem_of(small / "src" / "zero.c", small)
    assert problem.startswith(f"leads outside {small} (a symlink to /dev/zero)")
    assert (status, lines) == (0, [skipped_line("src/zero.c", problem), "1 finding, 0 errors"])


def test_a_symlink_to_a_source_outside_the_workspace_is_not_read(small: Path) -> None:
    outside = small.parent / "elsewhere.c"
    outside.write_text(UNALIGNED_C)
    (small / "src" / "net.c").write_text(UNALIGNED_C)  # the same text inside: read, and flagged
    (small / "src" / "linked.c").symlink_to(outside)
    status, lines = check(small, "--format", "json")
    found = {(f["file"], f["code"]) for f in json.loads("\n".join(lines))}
    assert status == 0
    assert found == {("src/net.c", "misaligned-array"), ("src/linked.c", "skipped-file")}


def test_a_source_over_the_size_limit_is_skipped_with_its_size(small: Path) -> None:
    big = small / "src" / "weights.c"
    with big.open("wb") as f:
        f.truncate(limits.SOURCE_MAX_BYTES + 1)  # sparse: no 64 MB written
    status, lines = check(small)
    problem = problem_of(big, small)
    assert "is larger than Fixpoint reads" in problem
    assert (status, lines) == (0, [skipped_line("src/weights.c", problem), "1 finding, 0 errors"])


def test_1500_nested_folders_are_walked_without_recursion_and_the_cut_is_reported(
    small: Path, deep: list[Path]
) -> None:
    shallow = deep[11]
    (shallow / "net.c").write_text(UNALIGNED_C)  # within the budget: checked
    (deep[-1] / "net.c").write_text(UNALIGNED_C)  # 1,500 levels down: not indexed
    status, lines = check(small)
    assert status == 0 and lines[-1] == "3 findings, 0 errors"
    note = f"1 folder(s) nested more than {limits.WALK_MAX_DEPTH} levels below {small} were not indexed"
    assert lines[0].startswith(f".:1:1: warning: {note} (first: deep/d/d/")
    assert lines[0].endswith("open a folder further down) [skipped-file]")
    shallow_relative = (shallow / "net.c").relative_to(small)  # its two findings, one per buffer
    assert [line.split(":")[0] for line in lines[1:3]] == [str(shallow_relative)] * 2
    assert all(line.endswith("[misaligned-array]") for line in lines[1:3])


def test_a_fifo_fixpoint_toml_is_not_read_and_said_so(small: Path) -> None:
    toml = small / "fixpoint.toml"
    os.mkfifo(toml)
    project, findings = settings.load(small)
    assert (project.path, findings) == (None, [])  # defaults, and no blocking open
    status, lines = check(small)
    assert (status, lines) == (
        0,
        [skipped_line("fixpoint.toml", problem_of(toml, small)), "1 finding, 0 errors"],
    )


def test_settings_that_leave_the_workspace_are_refused_at_their_line(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw").resolve()
    outside = tmp_path / "outside"
    shutil.move(tree / "model", outside)
    (tree / "model").symlink_to(outside)  # params and model now resolve out of the workspace
    (tree / "fixpoint.toml").write_text(
        'model = "model/residual.onnx"\nparams = "model/residual.params.json"\ngenerated = "../escape"\n'
    )
    project, findings = settings.load(tree)
    assert (project.model, project.params, project.generated) == (None, None, tree / "generated")
    # quantcore.project may refuse them itself (the CLI's check) or leave it to the server: either way
    # one finding per setting, at its line, saying where it leads
    assert [(f.code, f.span.line, f.message.split(":")[0]) for f in findings] == [
        (Code.PROJECT_SETTINGS, 0, "model"),
        (Code.PROJECT_SETTINGS, 1, "params"),
        (Code.PROJECT_SETTINGS, 2, "generated"),
    ]
    assert all("leads outside" in f.message and f.message.endswith("(the default is used)") for f in findings)
    refused = settings.refusal(findings, "generated")
    assert refused is not None and refused.startswith("fixpoint.toml:3: generated: ")
    assert "../escape" in refused and "leads outside" in refused
    status, lines = check(tree)
    assert sum("[project-settings]" in line for line in lines) == 3 and status == 0
    assert not (tmp_path / "escape").exists()


def test_a_model_that_cannot_be_loaded_is_a_finding_on_the_json(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw").resolve()
    (tree / "model" / "residual.onnx").write_bytes(b"\x08\x07 not a protobuf")
    index = WorkspaceIndex(tree)
    index.project, _ = settings.load(tree)
    index.scan()
    findings = [f for f in run_rules(index.context()) if f.code is Code.SKIPPED_FILE]
    params = tree / "model" / "residual.params.json"
    line = next(n for n, row in enumerate(params.read_text().split("\n")) if '"path":' in row)
    assert [(f.path, f.span.line) for f in findings] == [(params, line)]
    assert findings[0].message.startswith("model not used: ")
    assert findings[0].message.endswith("; the checks that compare C code with this JSON's layers do not run")


def test_a_model_outside_the_workspace_is_never_loaded(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw").resolve()
    outside = tmp_path / "residual.onnx"
    shutil.move(tree / "model" / "residual.onnx", outside)
    params = tree / "model" / "residual.params.json"
    # settings.load refuses such a project model; a context built around that must still not load it
    ctx = fixtures.context(tree, Project(model=outside, params=params, generated=tree / "src" / "model"))
    model = ctx.quantized(ctx.params_files()[0])
    assert model is not None and list(model.graph.nodes) == []
    assert model.error == f"the model '{outside}' is outside the workspace {tree}"


def test_the_index_never_opens_what_it_must_not_read(small: Path) -> None:
    os.mkfifo(small / "src" / "pipe.c")
    (small / "src" / "zero.c").symlink_to("/dev/zero")
    (small.parent / "secret.c").write_text("int secret;\n")
    index = WorkspaceIndex(small)
    assert index.scan() == 3
    assert index.read(small / "src" / "pipe.c") is None  # returns at once: no open that blocks
    assert index.read(small / "src" / "zero.c") is None
    assert index.read(small.parent / "secret.c") is None  # a hover on a file outside the workspace
    assert index.read(small / "src" / "main.c") == "int main(void) { return 0; }\n"
    assert sorted(index.skipped) == [small / "src" / "pipe.c", small / "src" / "zero.c"]
    assert index.problem(small / "src" / "main.c") is None


def test_a_fifo_as_the_fine_tuned_weights_is_not_opened(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw").resolve()
    params = tree / "model" / "residual.params.json"
    doc = json.loads(params.read_text())
    doc["finetuned"] = {"method": "qat", "weights": "residual.finetuned.npz", "sha256": "0" * 64}
    params.write_text(json.dumps(doc, indent=2) + "\n")
    os.mkfifo(tree / "model" / "residual.finetuned.npz")
    status, lines = check(tree, "--format", "json")
    skipped = [f["message"] for f in json.loads("\n".join(lines)) if f["code"] == "skipped-file"]
    problem = problem_of(tree / "model" / "residual.finetuned.npz", tree)
    assert status == 0  # warnings only: the sources are stale now, and the sidecar is skipped
    assert skipped == [
        f"model not used: its fine-tuned weights '{tree}/model/residual.finetuned.npz' {problem}; the checks"
        " that compare C code with this JSON's layers do not run"
    ]


def test_a_file_name_with_a_newline_cannot_forge_a_line_of_the_report(small: Path) -> None:
    (small / "src" / "net\nmain.c:1:1: error: forged [unscaled-bias]\n.c").write_text(UNALIGNED_C)
    status, lines = check(small)
    shown = "src/net<U+000A>main.c:1:1: error: forged [unscaled-bias]<U+000A>.c"
    assert status == 0 and len(lines) == 3 and lines[-1] == "2 findings, 0 errors"
    assert all(line.startswith(f"{shown}:1:") and line.endswith("[misaligned-array]") for line in lines[:2])


def test_a_fixpoint_toml_over_its_size_limit_is_one_finding(small: Path) -> None:
    toml = small / "fixpoint.toml"
    with toml.open("wb") as f:
        f.truncate(limits.TOML_MAX_BYTES + 1)
    project, findings = settings.load(small)
    assert project.path == toml and [(f.code, f.span.line) for f in findings] == [(Code.PROJECT_SETTINGS, 0)]
    assert "is larger than Fixpoint reads" in findings[0].message


def test_files_are_hashed_within_the_boundary_models_are_read_from(tmp_path: Path) -> None:
    """fixpoint.toml may name a model in the repository above the workspace (read_roots): the stale check
    hashes it like one inside; a file outside the repository is not read."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    tree = make_tree(repo / "fw").resolve()
    shared = repo / "shared.onnx"
    shared.write_bytes(b"model bytes")
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"model bytes")
    ctx = fixtures.context(tree)
    assert ctx.file_sha256(shared) == hashlib.sha256(b"model bytes").hexdigest()
    assert ctx.file_sha256(outside) is None
