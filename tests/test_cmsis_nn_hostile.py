"""A CMSIS-NN checkout whose git config names commands (core.fsmonitor, a filter driver): Fixpoint's git
calls never run them, whichever way the checkout is chosen (`cmsis-nn status --path`, FIXPOINT_CMSIS_NN,
[cmsis_nn] path in fixpoint.toml); --ref cannot smuggle an option into git; a config that hangs git
does not hang Fixpoint.

Each hostile checkout is first shown to run its command under a plain `git describe --dirty`, so a test
that passes is one where Fixpoint's hardening, not the set-up, kept the command from running.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from quantcore.cli import main
from quantcore.targets import cmsis_nn
from tests import needs
from tests.targets.models import MAXPOOL_SRC
from tests.test_cmsis_nn_locator import commit_change, git, git_checkout

pytestmark = needs.tool("git")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(cmsis_nn.ENV_VAR, raising=False)
    return tmp_path / "xdg-cache" / "fixpoint" / "cmsis-nn"


def _script(path: Path, marker: Path) -> Path:
    path.write_text(f"#!/bin/sh\necho {path.stem} >> '{marker}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A CMSIS-NN git checkout whose .git/config runs a script from core.fsmonitor and a clean filter."""
    repo = git_checkout(tmp_path / "hostile")
    marker = tmp_path / "executed"
    (repo / ".gitattributes").write_text("*.h filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    git(repo, "tag", "-f", "v7.0.0")
    git(repo, "config", "core.fsmonitor", str(_script(tmp_path / "fsmonitor.sh", marker)))
    git(repo, "config", "filter.evil.clean", str(_script(tmp_path / "clean.sh", marker)))
    git(repo, "config", "filter.evil.required", "true")
    _stat_dirty(repo)
    subprocess.run(
        ["git", "-C", str(repo), "describe", "--tags", "--dirty"], capture_output=True, check=False
    )
    assert set(marker.read_text().split()) == {"fsmonitor", "clean"}  # plain git runs both: hostile for real
    marker.unlink()
    _stat_dirty(repo)
    return repo, marker


def _stat_dirty(repo: Path) -> None:
    # Same content, newer mtime: git must hash the file again, through the clean filter.
    header = repo / "Include" / "arm_nnfunctions.h"
    later = time.time() + 5
    os.utime(header, (later, later))


def test_cmsis_nn_status_runs_nothing_the_checkout_names(
    hostile: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo, marker = hostile
    assert main(["cmsis-nn", "status", "--path", str(repo)]) == 0
    assert "  git:       v7.0.0 (commit " in capsys.readouterr().out
    assert not marker.exists()


def test_the_environment_variable_route_runs_nothing_either(
    hostile: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, marker = hostile
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(repo))
    found = cmsis_nn.locate()
    assert (found.source, found.describe, found.dirty) == ("env", "v7.0.0", False)
    assert not marker.exists()


def test_the_fixpoint_toml_route_runs_nothing_either(
    hostile: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo, marker = hostile
    (tmp_path / "fixpoint.toml").write_text(f'[cmsis_nn]\npath = "{repo}"\n')
    monkeypatch.chdir(tmp_path)
    code = main(["build", "--target", "host", "--src", str(MAXPOOL_SRC)])
    # The stand-in checkout has no CMakeLists.txt: the build fails after git described it.
    assert code == 1 and "configuring CMSIS-NN" in capsys.readouterr().err
    assert not marker.exists()


def test_hooks_do_not_run_on_install(
    hostile: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, marker = hostile
    templates = tmp_path / "templates"
    (templates / "hooks").mkdir(parents=True)
    _script(templates / "hooks" / "post-checkout", marker)
    monkeypatch.setenv("GIT_TEMPLATE_DIR", str(templates))
    installed = cmsis_nn.install(str(repo), ref="v7.0.0")
    assert installed.describe == "v7.0.0" and not marker.exists()


def test_git_repository_variables_of_the_caller_do_not_redirect_git(
    hostile: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = hostile
    other = git_checkout(tmp_path / "other")
    foreign = commit_change(other, "another commit\n")
    own = git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # e.g. Fixpoint run from a git hook
    assert cmsis_nn.locate(repo).commit == own != foreign


@pytest.mark.parametrize(
    "ref", ["--upload-pack=touch {marker}", "-fsomething", "v7.0.0\nfoo", "v7..0", "a b", "HEAD~1:x"]
)
def test_a_ref_that_is_not_a_ref_is_refused_before_git_sees_it(
    ref: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_checkout(tmp_path / "repo")
    marker = tmp_path / "ran"
    ref = ref.format(marker=marker)
    assert main(["cmsis-nn", "install", str(repo), f"--ref={ref}"]) == 2  # bad input
    assert (
        f"--ref {ref!r} is not a tag, branch or commit name (it must not start with '-' nor hold spaces"
        in capsys.readouterr().err
    )
    assert not marker.exists() and not cmsis_nn.cache_checkout().exists()


def test_a_ref_the_repository_does_not_have_is_named(tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "repo")
    with pytest.raises(cmsis_nn.CmsisNnInstallError) as error:
        cmsis_nn.install(str(repo), ref="v9.9.9")
    assert str(error.value) == f"--ref 'v9.9.9' is not a tag, branch or commit of {repo}"


def test_a_branch_of_the_origin_is_a_ref_too(tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "feature")
    feature = commit_change(repo, "on a branch\n")
    git(repo, "checkout", "-q", "-")
    assert cmsis_nn.install(str(repo), ref="feature").commit == feature


def test_a_config_that_hangs_git_does_not_hang_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_checkout(tmp_path / "repo")
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    git(repo, "config", "include.path", str(fifo))  # every git command now blocks opening the FIFO
    monkeypatch.setattr(cmsis_nn, "GIT_QUERY_TIMEOUT_S", 1.0)
    start = time.monotonic()
    found = cmsis_nn.locate(repo)
    assert (found.commit, found.describe) == (None, None)  # no git facts: sources keyed by content
    assert time.monotonic() - start < 10
    assert cmsis_nn.source_key(found).startswith("tree-")
