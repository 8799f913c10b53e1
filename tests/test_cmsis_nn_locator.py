"""Finding and installing CMSIS-NN checkouts; every test gets its own XDG_CACHE_HOME, never the real cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from quantcore.cli import main
from quantcore.errors import CmsisNnNotFound
from quantcore.targets import cmsis_nn
from tests import needs

needs_git = needs.tool("git")

PDSC = """<?xml version="1.0" encoding="UTF-8"?>
<package schemaVersion="1.7.36" xmlns:xs="http://www.w3.org/2001/XMLSchema-instance">
  <name>CMSIS-NN</name>
  <releases>
    <release version="6.0.0">older</release>
    <release version="7.0.0" date="2025-01-01">newest</release>
    <release version="4.1.0">oldest</release>
  </releases>
</package>
"""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(cmsis_nn.ENV_VAR, raising=False)
    return tmp_path / "xdg-cache" / "fixpoint" / "cmsis-nn"


def fake_checkout(path: Path, pdsc: str | None = PDSC) -> Path:
    (path / "Include").mkdir(parents=True)
    (path / "Include" / "arm_nnfunctions.h").write_text("/* stand-in for the real header */\n")
    if pdsc is not None:
        (path / "ARM.CMSIS-NN.pdsc").write_text(pdsc)
    return path


def git(path: Path, *args: str) -> str:
    config = [
        "-c",
        "user.name=Fixpoint Test",
        "-c",
        "user.email=test@example.invalid",
        "-c",
        "commit.gpgsign=false",
    ]
    done = subprocess.run(
        ["git", "-C", str(path), *config, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def git_checkout(path: Path) -> Path:
    fake_checkout(path)
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    git(path, "tag", "v7.0.0")
    return path


def commit_change(path: Path, text: str) -> str:
    (path / "README.md").write_text(text)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", text)
    return git(path, "rev-parse", "HEAD")


# ---------------------------------------------------------------------------------------------- locate


def test_nothing_found_says_how_to_provide_one(cache: Path) -> None:
    with pytest.raises(CmsisNnNotFound) as error:
        cmsis_nn.locate()
    message = str(error.value)
    assert "fixpoint cmsis-nn install" in message
    assert cmsis_nn.ENV_VAR in message
    assert str(cache) in message


def test_cache_is_used_last(cache: Path) -> None:
    fake_checkout(cache)
    found = cmsis_nn.locate()
    assert (found.path, found.source) == (cache.resolve(), "cache")


def test_env_var_wins_over_cache(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_checkout(cache)
    other = fake_checkout(tmp_path / "elsewhere")
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(other))
    found = cmsis_nn.locate()
    assert (found.path, found.source) == (other.resolve(), "env")


def test_setting_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(fake_checkout(tmp_path / "from-env")))
    chosen = fake_checkout(tmp_path / "from-setting")
    found = cmsis_nn.locate(chosen)
    assert (found.path, found.source) == (chosen.resolve(), "setting")


def test_invalid_env_dir_is_reported_not_skipped(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_checkout(cache)
    empty = tmp_path / "not-cmsis-nn"
    empty.mkdir()
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(empty))
    with pytest.raises(CmsisNnNotFound) as error:
        cmsis_nn.locate()
    message = str(error.value)
    assert str(empty) in message
    assert "Include/arm_nnfunctions.h is missing" in message
    assert "fixpoint cmsis-nn install" in message


def test_invalid_setting_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CmsisNnNotFound, match="CMSIS-NN path setting"):
        cmsis_nn.locate(tmp_path / "missing")


def test_version_is_the_newest_pdsc_release(tmp_path: Path) -> None:
    found = cmsis_nn.locate(fake_checkout(tmp_path / "nn"))
    assert found.version == "7.0.0"
    assert found.commit is None


def test_no_pdsc_means_unknown_version(tmp_path: Path) -> None:
    assert cmsis_nn.locate(fake_checkout(tmp_path / "nn", pdsc=None)).version is None


@needs_git
def test_commit_of_a_git_checkout(tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "nn")
    found = cmsis_nn.locate(repo)
    assert found.commit == git(repo, "rev-parse", "HEAD")
    assert found.describe == "v7.0.0"


@needs_git
def test_copy_inside_another_repository_has_no_commit(tmp_path: Path) -> None:
    outer = tmp_path / "project"
    outer.mkdir()
    git(outer, "init", "-q")
    assert cmsis_nn.locate(fake_checkout(outer / "vendor" / "nn")).commit is None


# --------------------------------------------------------------------------------------------- install


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.parent.iterdir() if p.name.startswith(".cmsis-nn-install-"))


@needs_git
def test_install_from_a_local_repository(cache: Path, tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "upstream")
    installed = cmsis_nn.install(str(repo))
    assert installed.path == cache.resolve()
    assert installed.source == "cache"
    assert installed.commit == git(repo, "rev-parse", "HEAD")
    assert (cache / "Include" / "arm_nnfunctions.h").is_file()
    assert cmsis_nn.locate() == installed
    assert leftovers(cache) == []


@needs_git
def test_install_from_a_bare_repository_at_a_tag(cache: Path, tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "upstream")
    tagged = git(repo, "rev-parse", "HEAD")
    commit_change(repo, "after the tag")
    bare = tmp_path / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    installed = cmsis_nn.install(str(bare), ref="v7.0.0")
    assert installed.commit == tagged


@needs_git
def test_install_refuses_to_overwrite_a_different_checkout(cache: Path, tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "upstream")
    first = cmsis_nn.install(str(repo))
    second_commit = commit_change(repo, "newer")
    with pytest.raises(cmsis_nn.CmsisNnInstallError, match="--force"):
        cmsis_nn.install(str(repo))
    assert cmsis_nn.locate().commit == first.commit
    assert leftovers(cache) == []
    assert cmsis_nn.install(str(repo), force=True).commit == second_commit
    assert leftovers(cache) == []


@needs_git
def test_reinstalling_the_same_commit_is_a_no_op(tmp_path: Path) -> None:
    repo = git_checkout(tmp_path / "upstream")
    assert cmsis_nn.install(str(repo)) == cmsis_nn.install(str(repo))


@needs_git
def test_install_refuses_to_replace_a_plain_directory(cache: Path, tmp_path: Path) -> None:
    (cache / "something").mkdir(parents=True)
    with pytest.raises(cmsis_nn.CmsisNnInstallError, match="non-CMSIS-NN directory"):
        cmsis_nn.install(str(git_checkout(tmp_path / "upstream")))
    assert (cache / "something").is_dir()


@needs_git
def test_install_of_something_else_leaves_the_cache_alone(cache: Path, tmp_path: Path) -> None:
    other = tmp_path / "not-nn"
    other.mkdir()
    (other / "file.txt").write_text("x")
    git(other, "init", "-q")
    git(other, "add", ".")
    git(other, "commit", "-q", "-m", "x")
    with pytest.raises(cmsis_nn.CmsisNnInstallError, match="is not CMSIS-NN"):
        cmsis_nn.install(str(other))
    assert not cache.exists()
    assert leftovers(cache) == []


@needs_git
def test_install_of_a_plain_directory_points_to_the_env_var(tmp_path: Path) -> None:
    with pytest.raises(cmsis_nn.CmsisNnInstallError, match=cmsis_nn.ENV_VAR):
        cmsis_nn.install(str(fake_checkout(tmp_path / "plain")))


@needs_git
def test_install_of_a_directory_inside_another_repository_points_to_the_env_var(tmp_path: Path) -> None:
    outer = tmp_path / "project"
    outer.mkdir()
    git(outer, "init", "-q")
    with pytest.raises(cmsis_nn.CmsisNnInstallError, match="not a git repository"):
        cmsis_nn.install(str(fake_checkout(outer / "vendor" / "nn")))


# --------------------------------------------------------------------------------------------- CLI


def test_status_without_checkout_exits_2_with_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    # A missing checkout is something the user provides (CmsisNnNotFound is an InputError): exit 2.
    assert main(["cmsis-nn", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fixpoint cmsis-nn: no CMSIS-NN checkout found")
    assert "fixpoint cmsis-nn install" in err


def test_status_names_the_checkout_and_its_origin(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(fake_checkout(tmp_path / "nn")))
    assert main(["cmsis-nn", "status"]) == 0
    out = capsys.readouterr().out
    assert str((tmp_path / "nn").resolve()) in out
    assert cmsis_nn.ENV_VAR in out
    assert "7.0.0" in out


@needs_git
def test_install_command(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_checkout(tmp_path / "upstream")
    assert main(["cmsis-nn", "install", str(repo), "--ref", "v7.0.0"]) == 0
    assert str(cache.resolve()) in capsys.readouterr().out
    commit_change(repo, "newer")
    assert main(["cmsis-nn", "install", str(repo), "--ref", "HEAD"]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["cmsis-nn", "install", str(repo), "--ref", "HEAD", "--force"]) == 0


def test_a_checkout_of_another_major_release_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = PDSC.replace('<release version="7.0.0" date="2025-01-01">newest</release>', "")
    assert old != PDSC  # newest release now 6.0.0
    monkeypatch.setenv(cmsis_nn.ENV_VAR, str(fake_checkout(tmp_path / "nn", old)))
    assert main(["cmsis-nn", "status"]) == 0
    out = capsys.readouterr().out
    assert "warning:   CMSIS-NN at" in out and "is 6.0.0, but Fixpoint generates for the 7.0.0 API" in out
    assert "--ref v7.0.0" in out


def test_the_version_of_a_git_checkout_comes_from_its_tag() -> None:
    nn = cmsis_nn.CmsisNn(Path("/x"), "env", "0.0.0", "abc", "v7.0.0-43-g99f736a6")
    assert cmsis_nn.effective_version(nn) == "7.0.0" and cmsis_nn.version_warning(nn) is None
    untagged = cmsis_nn.CmsisNn(Path("/x"), "env", "0.0.0", "abc", None)
    assert "cannot tell which CMSIS-NN release" in (cmsis_nn.version_warning(untagged) or "")
