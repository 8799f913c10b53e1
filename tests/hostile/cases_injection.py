"""Cases of the classes "injection" (hostile names must be escaped) and "high" (output flood, generate's
atomicity, a busy serial port, git's fsmonitor and --ref)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.hostile import cscan, kit, models, names
from tests.hostile.kit import case
from tests.hostile.runner import Case, Check, Plan, Setup, ok, refuse
from tests.hostile.workspace import Workspace

# -- injection -------------------------------------------------------------------------------------------


def _model_names(place: str, text: str) -> models.Names:
    if place == "node":
        return models.Names(node=lambda role: f"{text} {role}")
    if place == "tensor":
        return models.Names(tensor=lambda role: f"{text} {role}")
    if place == "input":
        return models.Names(input=text)
    if place == "output":
        return models.Names(output=text)
    if place == "graph":
        return models.Names(graph=text)
    return models.Names()


def no_leak(marker: str, compile_check: bool) -> Check:
    """The check that `marker` is nowhere code in the generated sources, harness or linker script (and,
    with `compile_check`, that the generated sources still compile: a broken literal breaks the build)."""

    def check(w: Workspace) -> tuple[str, str] | None:
        found = cscan.leaks(cscan.generated_files(w.path("gen"), w.path("build")), marker)
        if found:
            return "injected", f"{marker} from the hostile name is code at {', '.join(found[:4])}"
        broken = cscan.syntax_errors(w.path("gen"), kit.cmsis_nn_dir() / "Include") if compile_check else None
        return ("injected", f"the hostile name broke the generated C: {broken}") if broken else None

    return check


VERIFIED = ("node",)
"""Placements whose text reaches the firmware's transcript (layer names): run on the host too. For the
others the generated sources are compiled (not built and run), which keeps the corpus fast."""
VERIFY_SRC = ("verify", "--target", "host", "--src", "gen", "--no-float-metrics")


def injection_case(kind: str, place: str, index: int) -> Case:
    marker = names.marker(index)
    text = names.KINDS[kind](marker)

    def setup(w: Workspace) -> Plan:
        w.copy("tiny", "calib.npz")
        model = f"{text}.onnx" if place == "model-file" else "model.onnx"
        params = f"{text}.params.json" if place == "params-file" else "model.params.json"
        models.save(models.tiny(_model_names(place, text)), w.path(model))
        steps = [ok(*kit.quantize(model, out=params)), ok(*kit.generate(params, model))]
        if place not in VERIFIED:
            return Plan(steps, checks=[no_leak(marker, compile_check=True)])
        verify = ok(*VERIFY_SRC, "--model", model, "--params", params)
        return Plan([*steps, verify], checks=[no_leak(marker, compile_check=False)])

    return case(
        f"{place}-{kind}",
        "injection",
        setup,
        f"{kind} text in the {place} name: quantize, generate (and host verify) pass, the name is never code",
        needs=("cmsis-nn", "gcc"),
    )


BOARD_NAME_KINDS = ("comment-end", "newline", "double-quote")


def board_name_case(kind: str, index: int) -> Case:
    """A hostile [board] name: it names the build folder and reaches the harness, startup code and the
    linker script. Built (exit 0, the name never code) or refused with one line naming fixpoint.toml."""
    marker = names.marker(index)
    text = names.KINDS[kind](marker)

    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        kit.board_project(w, "/dev/null", "127.0.0.1:1", name=text)
        return Plan([kit.BOARD_BUILD], checks=[no_leak(marker, compile_check=False)])

    return case(
        f"board-name-{kind}",
        "injection",
        setup,
        f"{kind} text as the board's name in fixpoint.toml: built with the name escaped, or refused",
        needs=("cmsis-nn", "arm"),
    )


def injection_cases() -> list[Case]:
    pairs = names.selection()
    cases = [injection_case(kind, place, n) for n, (kind, place) in enumerate(pairs, start=1)]
    return cases + [board_name_case(k, len(pairs) + n) for n, k in enumerate(BOARD_NAME_KINDS, start=1)]


# -- high severity ------------------------------------------------------------------------------------------

FLOOD_C = """\
#include <stdio.h>
#include <string.h>

/* A firmware that prints without end (and without a newline) before main(): the runner must stream its
   output and stop it at a cap, not keep it all in memory. */
__attribute__((constructor)) static void flood(void)
{
    static char block[65536];
    memset(block, 'F', sizeof block);
    for (;;) {
        fwrite(block, 1, sizeof block, %s);
    }
}
"""


def _flood(stream: str) -> Case:
    def setup(w: Workspace) -> Plan:
        w.copy("tiny", *kit.TINY, "gen")
        w.write("gen/flood.c", FLOOD_C % stream)
        argv = (*kit.VERIFY, "--src", "gen", "--timeout", "20")
        return Plan([refuse(*argv, names=[("MiB", "MB", "bytes", "limit")], timeout=45)])

    return case(
        f"verify-{stream}-flood",
        "high",
        setup,
        f"firmware printing endlessly on {stream}: stopped at the output cap, exit 1, memory bounded",
        needs=("cmsis-nn", "gcc"),
    )


def _wide_generated(w: Workspace) -> None:
    w.copy("wide", "wide.onnx", "a.params.json", "b.params.json", "gen")


GEN_FILES = ("gen/model.h", "gen/model.c", "gen/model_data.c")


def _regenerate(fsize: int | None = None) -> Plan:
    """generate of the wide model's parameter set b over gen/ (from set a): refused naming what failed,
    all three files kept as they were."""
    step = refuse(*kit.generate("b.params.json", "wide.onnx"), names=[("gen", "model_data.c")], fsize=fsize)
    return Plan([step], protect=GEN_FILES)


def _atomic_fsize(w: Workspace) -> Plan:
    """model_data.c (19 KB of weights) is the largest file: a file-size limit between it and the others
    makes exactly its write fail, as a full disk would, after model.h and model.c were written."""
    _wide_generated(w)
    sizes = [w.path(f).stat().st_size for f in GEN_FILES]
    limit = max(sizes[:2]) + 4096
    if sizes[2] < limit + 4096:
        raise RuntimeError(f"model_data.c ({sizes[2]} B) is not much larger than the others ({sizes[:2]})")
    return _regenerate(fsize=limit)


def _atomic_immutable(w: Workspace) -> Plan:
    """model_data.c cannot be replaced (immutable): regenerating must leave all three files as they were."""
    _wide_generated(w)
    kit.immutable(w, "gen/model_data.c")
    return _regenerate()


def _serial_busy(w: Workspace) -> Plan:
    kit.tiny(w)
    device = kit.pty(w, locked=True)
    kit.board_project(w, device, f"127.0.0.1:{kit.free_port()}")
    return Plan([refuse(*kit.BOARD_FLASH, names=[device, ("busy", "in use", "locked")])])


def hostile_checkout(w: Workspace, relative: str = "nn") -> Path:
    """A git checkout that looks like CMSIS-NN and whose core.fsmonitor runs a script writing outside."""
    nn = w.path(relative)
    (nn / "Include").mkdir(parents=True)
    (nn / "Include" / "arm_nnfunctions.h").write_text("/* not really CMSIS-NN */\n")
    hook = _fsmonitor_hook(w, f"{relative}/fsmonitor.sh")
    _git(nn, "init", "-q")
    _git(nn, "add", "-A")
    _git(nn, "-c", "user.name=corpus", "-c", "user.email=corpus@example.invalid", "commit", "-qm", "fake")
    _git(nn, "config", "core.fsmonitor", str(hook))
    return nn


def _fsmonitor_hook(w: Workspace, relative: str) -> Path:
    """A core.fsmonitor program that leaves a file outside the workspace when git runs it."""
    hook = w.write(relative, f'#!/bin/sh\ntouch "{w.outside}/fsmonitor-ran"\nexit 0\n')
    hook.chmod(0o755)
    return hook


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _fsmonitor_path(w: Workspace) -> Plan:
    hostile_checkout(w)
    return Plan([ok("cmsis-nn", "status", "--path", "nn")])


def _fsmonitor_env(w: Workspace) -> Plan:
    nn = hostile_checkout(w)
    return Plan([ok("cmsis-nn", "status", env={"FIXPOINT_CMSIS_NN": str(nn)})])


def _fsmonitor_toml(w: Workspace) -> Plan:
    """[cmsis_nn] path naming a clone of the real checkout with a hostile fsmonitor: verify still passes."""
    kit.tiny(w)
    subprocess.run(["git", "clone", "-q", "--local", str(kit.cmsis_nn_dir()), str(w.path("nn"))], check=True)
    hook = _fsmonitor_hook(w, "nn-fsmonitor.sh")
    _git(w.path("nn"), "config", "core.fsmonitor", str(hook))
    w.write("fixpoint.toml", '[cmsis_nn]\npath = "nn"\n')
    return Plan([ok(*kit.VERIFY)])


def _install_ref(ref: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        hostile_checkout(w)
        env = {"XDG_CACHE_HOME": str(w.path("cache"))}
        return Plan([refuse("cmsis-nn", "install", "nn", f"--ref={ref}", names=[ref], env=env)])

    return setup


def high_cases() -> list[Case]:
    return [
        _flood("stdout"),
        _flood("stderr"),
        case(
            "generate-atomic-disk-full",
            "high",
            _atomic_fsize,
            "writing model_data.c fails (file-size limit): model.h and model.c must stay as they were",
        ),
        case(
            "generate-atomic-immutable-file",
            "high",
            _atomic_immutable,
            "model_data.c cannot be replaced: the other two must not be replaced either",
            needs=("immutable",),
        ),
        case(
            "serial-port-busy",
            "high",
            _serial_busy,
            "the board's serial port is held (exclusive lock) by another program",
            needs=("cmsis-nn", "arm"),
        ),
        case(
            "git-fsmonitor-status-path",
            "high",
            _fsmonitor_path,
            "cmsis-nn status --path on a checkout whose core.fsmonitor runs a program",
            needs=("git",),
        ),
        case(
            "git-fsmonitor-env",
            "high",
            _fsmonitor_env,
            "FIXPOINT_CMSIS_NN names a checkout whose core.fsmonitor runs a program",
            needs=("git",),
        ),
        case(
            "git-fsmonitor-toml-verify",
            "high",
            _fsmonitor_toml,
            "[cmsis_nn] path names a checkout whose core.fsmonitor runs a program; verify runs git there",
            needs=("git", "cmsis-nn-git", "gcc"),
        ),
        case(
            "cmsis-install-ref-option-f",
            "high",
            _install_ref("-f"),
            "--ref=-f reaches git checkout as an option",
            needs=("git",),
        ),
        case(
            "cmsis-install-ref-option-patch",
            "high",
            _install_ref("--patch"),
            "--ref=--patch reaches git checkout as an option",
            needs=("git",),
        ),
    ]
