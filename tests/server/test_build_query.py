"""kernel-opt-level with the build system's own answer (parse/build_files/build_query.py): real GNU make
on real Makefiles ($(filter-out ...), ifeq/else, included makefiles) and a real CMake build tree's
file-API reply (a generator expression), against what the text reader alone reports. Positions and
quick fixes stay the text reader's; the build query drops what the evaluated build does not do."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from fixpoint_server.findings import Finding, LineIndex, Span
from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.parse.build_files.build_query import BuildQuery, compile_commands, query_make
from fixpoint_server.rules import kernel_opt_level
from fixpoint_server.rules.build_facts import enable_build_query
from fixpoint_server.rules.context import CheckContext

from quantcore.project import Project
from tests import needs

needs_make = needs.tool("make")
needs_cmake = needs.tool("cmake")

KERNEL = "CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c"
BASE = {
    "main.c": "int main(void) { return 0; }\n",
    "generated/model.c": "int model_invoke(void) { return 0; }\n",
    KERNEL: "int arm_convolve_s8(void) { return 0; }\n",
}
RULES = """\
firmware.elf: $(OBJS)
\t$(CC) $^ -o $@
build/CMSIS-NN/%.o: CMSIS-NN/%.c
\t@mkdir -p $(dir $@)
\t$(CC) $(KERNEL_CFLAGS) -c $< -o $@
build/generated/%.o: generated/%.c
\t$(CC) $(KERNEL_CFLAGS) -c $< -o $@
build/%.o: %.c
\t$(CC) $(CFLAGS) -c $< -o $@
"""
SOURCES = f"SRCS = main.c generated/model.c {KERNEL}\nOBJS = $(SRCS:%.c=build/%.o)\n"
O3_RISK = "-O3 auto-vectorisation is reported to break fixed-point kernels; the policy asks for -O1"
O0_RISK = "-O0 gives no speed-up from CMSIS-NN: its inline SIMD helpers stay function calls"


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in {**BASE, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def context(root: Path, index: WorkspaceIndex | None = None) -> CheckContext:
    index = index or WorkspaceIndex(root, Project(path=root / "fixpoint.toml", generated=root / "generated"))
    index.scan()
    return index.context()


def findings(root: Path, query: BuildQuery | None = None) -> list[tuple[str, str, Span, str]]:
    """(file, message, span, severity) of kernel-opt-level; with `query`, the build is asked."""
    ctx = context(root)
    if query is not None:
        enable_build_query(ctx.cache, query)
    found = sorted(kernel_opt_level.check(ctx), key=Finding.sort_key)
    return [
        (f.path.relative_to(root).as_posix(), f.message, f.span, f.effective_severity.value) for f in found
    ]


def at(text: str, needle: str, nth: int = 0) -> Span:
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    return LineIndex(text).span(start, start + len(needle))


def asked(root: Path) -> BuildQuery:
    return BuildQuery(root, background=False)


def o3(
    files: str, text: str, needle: str = "-O3", nth: int = 0, file: str = "Makefile"
) -> tuple[str, str, Span, str]:
    return (file, f"-O3 on kernel sources ({files}): {O3_RISK}", at(text, needle, nth), "warning")


# ------------------------------------------------------------------------------------------ filter-out

FILTER_OUT = (
    "CC = arm-none-eabi-gcc\nCFLAGS = -mthumb -O3 -fno-builtin\n"
    "KERNEL_CFLAGS := $(filter-out -O3 -fno-builtin,$(CFLAGS))\n" + SOURCES + RULES
)
BUILTIN_RISK = "-fno-builtin stops memcpy/memset being inlined, and the kernels copy in loops: slow"


@needs_make
def test_filter_out_drops_the_flags_the_text_reader_reports(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": FILTER_OUT})
    kernels = f"generated/model.c, {KERNEL}"
    assert findings(tmp_path) == [
        o3(kernels, FILTER_OUT),
        (
            "Makefile",
            f"-fno-builtin on kernel sources ({kernels}): {BUILTIN_RISK}",
            at(FILTER_OUT, "-fno-builtin"),
            "warning",
        ),
    ]
    assert findings(tmp_path, asked(tmp_path)) == []


@needs_make
def test_filter_out_of_another_flag_keeps_the_finding_with_the_text_readers_place_and_fix(
    tmp_path: Path,
) -> None:
    makefile = FILTER_OUT.replace("filter-out -O3 ", "filter-out ")
    write(tmp_path, {"Makefile": makefile})
    ctx = context(tmp_path)
    enable_build_query(ctx.cache, asked(tmp_path))
    (finding,) = kernel_opt_level.check(ctx)
    assert (finding.path, finding.span) == (tmp_path / "Makefile", at(makefile, "-O3"))
    assert finding.message == f"-O3 on kernel sources (generated/model.c, {KERNEL}): {O3_RISK}"
    (fix,) = finding.fixes
    assert (fix.title, fix.edits[0].span, fix.edits[0].new_text) == (
        "Use -O1 for kernel sources",
        at(makefile, "-O3"),
        "-O1",
    )


@needs_make
def test_a_later_level_for_the_kernels_is_the_evaluated_one(tmp_path: Path) -> None:
    """The text reader's own rule (a later -O for the same files wins) agrees with make about -O3;
    the -fno-builtin that filter-out removed is make's alone to know."""
    makefile = FILTER_OUT.replace("-O3 -fno-builtin,$(CFLAGS))", "-fno-builtin,$(CFLAGS)) -O1")
    write(tmp_path, {"Makefile": makefile})
    assert [f[1] for f in findings(tmp_path)] == [
        f"-fno-builtin on kernel sources (generated/model.c, {KERNEL}): {BUILTIN_RISK}"
    ]
    assert findings(tmp_path, asked(tmp_path)) == []


# ---------------------------------------------------------------------------------------- ifeq / else

IFEQ = """\
CC = arm-none-eabi-gcc
ifeq ($(BUILD),release)
OPT = -O3
else
OPT = -O0
endif
CFLAGS = -mthumb $(OPT)
KERNEL_CFLAGS = $(CFLAGS)
"""


@needs_make
@pytest.mark.parametrize(("build", "flag"), [("", "-O0"), ("BUILD = release\n", "-O3")])
def test_ifeq_else_the_taken_branch_decides(tmp_path: Path, build: str, flag: str) -> None:
    """The text reader reads both branches in order (the else branch's -O0 wins over -O3 whatever
    BUILD is); make takes one."""
    makefile = build + IFEQ + SOURCES + RULES
    write(tmp_path, {"Makefile": makefile})

    def level(kernels: str) -> tuple[str, str, Span, str]:
        risk = O0_RISK if flag == "-O0" else O3_RISK
        return ("Makefile", f"{flag} on kernel sources ({kernels}): {risk}", at(makefile, flag), "warning")

    o0 = (
        "Makefile",
        f"-O0 on kernel sources ({KERNEL}, generated/model.c): {O0_RISK}",
        at(makefile, "-O0"),
        "warning",
    )
    assert findings(tmp_path) == [o0]
    assert findings(tmp_path, asked(tmp_path)) == [level(f"generated/model.c, {KERNEL}")]


@needs_make
def test_a_dead_branch_is_dropped_even_when_nothing_is_compiled(tmp_path: Path) -> None:
    """A default goal that compiles nothing: the variable's evaluated value decides."""
    makefile = (
        f"ifeq ($(DEBUG),1)\nCFLAGS += -fno-builtin\nendif\nCFLAGS += -mthumb\nSRCS = {KERNEL}\n"
        "help:\n\t@echo make firmware\n"
    )
    write(tmp_path, {"Makefile": makefile})
    assert [f[1] for f in findings(tmp_path)] == [
        f"-fno-builtin on kernel sources ({KERNEL}): {BUILTIN_RISK}"
    ]
    assert findings(tmp_path, asked(tmp_path)) == []


@needs_make
def test_a_rounding_definition_in_a_branch_not_taken_is_not_defined(tmp_path: Path) -> None:
    makefile = (
        "CC = arm-none-eabi-gcc\nCFLAGS = -mthumb -O1\nifeq ($(ROUNDING),single)\n"
        "CFLAGS += -DCMSIS_NN_USE_SINGLE_ROUNDING\nendif\nKERNEL_CFLAGS = $(CFLAGS)\n" + SOURCES + RULES
    )
    write(tmp_path, {"Makefile": makefile})
    assert findings(tmp_path) == [
        (
            "Makefile",
            f"CMSIS_NN_USE_SINGLE_ROUNDING is defined for kernel sources (generated/model.c, {KERNEL}), but"
            ' the parameters were computed for double rounding (fixpoint.toml rounding = "double"): results'
            " differ from the reference in the last bit",
            at(makefile, "-DCMSIS_NN_USE_SINGLE_ROUNDING"),
            "warning",
        )
    ]
    assert findings(tmp_path, asked(tmp_path)) == []
    (tmp_path / "Makefile").write_text("ROUNDING = single\n" + makefile)
    assert [f[1].split(" (")[0] for f in findings(tmp_path, asked(tmp_path))] == [
        "CMSIS_NN_USE_SINGLE_ROUNDING is defined for kernel sources"
    ]


# ---------------------------------------------------------------------------------- included makefiles

CONFIG_MK = "OPT ?= -O3\nCFLAGS += -mthumb $(OPT)\nKERNEL_CFLAGS = $(CFLAGS)\n"


@needs_make
@pytest.mark.parametrize(("before", "kept"), [("OPT := -O1\n", False), ("", True)])
def test_included_makefile_is_read_with_what_its_includer_set(
    tmp_path: Path, before: str, kept: bool
) -> None:
    makefile = "CC = arm-none-eabi-gcc\n" + before + "include mk/config.mk\n" + SOURCES + RULES
    write(tmp_path, {"Makefile": makefile, "mk/config.mk": CONFIG_MK})
    text_only = [o3(f"generated/model.c, {KERNEL}", CONFIG_MK, file="mk/config.mk")]
    assert findings(tmp_path) == text_only
    assert findings(tmp_path, asked(tmp_path)) == (text_only if kept else [])
    result = query_make(tmp_path / "Makefile", tmp_path, ["mk/config.mk"])
    assert result.describes == {(tmp_path / p).resolve() for p in ("Makefile", "mk/config.mk")}
    assert (result.locations["CFLAGS"], result.globals["CFLAGS"]) == ("mk/config.mk:2", "-mthumb $(OPT)")
    assert result.globals["OPT"] == ("-O1" if before else "-O3")


# --------------------------------------------------------------------------------------------- CMake

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.16)
project(fw C)
add_executable(fw main.c generated/model.c)
target_compile_options(fw PRIVATE $<$<CONFIG:Release>:-O3>)
"""


def configure(root: Path, build_type: str, *options: str) -> Path:
    build = root / "build"
    query = build / ".cmake" / "api" / "v1" / "query" / "codemodel-v2"
    query.parent.mkdir(parents=True, exist_ok=True)
    query.touch()  # the user's query file: the next configure writes the reply
    subprocess.run(
        ["cmake", "-S", str(root), "-B", str(build), f"-DCMAKE_BUILD_TYPE={build_type}", *options],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return build


@needs_cmake
@pytest.mark.parametrize(("build_type", "kept"), [("Debug", False), ("Release", True)])
def test_cmake_reply_evaluates_a_generator_expression(tmp_path: Path, build_type: str, kept: bool) -> None:
    write(tmp_path, {"CMakeLists.txt": CMAKELISTS})
    text_only = [o3("generated/model.c", CMAKELISTS, file="CMakeLists.txt")]
    assert findings(tmp_path) == text_only
    configure(tmp_path, build_type)
    assert findings(tmp_path, asked(tmp_path)) == (text_only if kept else [])


CMSIS_NN_CMAKE = """\
cmake_minimum_required(VERSION 3.16)
project(cmsis-nn C)
set(CMSIS_OPTIMIZATION_LEVEL "-Ofast" CACHE STRING "the level CMSIS-NN is compiled with")
add_library(cmsis-nn STATIC Source/ConvolutionFunctions/arm_convolve_s8.c)
target_compile_options(cmsis-nn PRIVATE ${CMSIS_OPTIMIZATION_LEVEL})
"""
WITH_CMSIS_NN = """\
cmake_minimum_required(VERSION 3.16)
project(fw C)
add_subdirectory(CMSIS-NN)
add_executable(fw main.c generated/model.c)
target_link_libraries(fw cmsis-nn)
"""


@needs_cmake
@pytest.mark.parametrize(("level", "kept"), [(None, True), ("-O1", False)])
def test_cmsis_nn_level_given_to_cmake_is_read_from_the_reply(
    tmp_path: Path, level: str | None, kept: bool
) -> None:
    """CMSIS_OPTIMIZATION_LEVEL passed on cmake's command line is in no file: only the reply knows it."""
    write(tmp_path, {"CMakeLists.txt": WITH_CMSIS_NN, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    text_only = [
        (
            "CMakeLists.txt",
            "CMSIS-NN (CMSIS-NN) is compiled with its CMSIS_OPTIMIZATION_LEVEL, -Ofast unless set: -Ofast is"
            " -O3 (auto-vectorisation, reported to break fixed-point kernels) plus -ffast-math; the policy"
            " asks for -O1; set it before adding CMSIS-NN (or pass -DCMSIS_OPTIMIZATION_LEVEL=-O1 to cmake)",
            at(WITH_CMSIS_NN, "CMSIS-NN"),
            "warning",
        )
    ]
    assert findings(tmp_path) == text_only
    configure(tmp_path, "Debug", *([f"-DCMSIS_OPTIMIZATION_LEVEL={level}"] if level else []))
    assert findings(tmp_path, asked(tmp_path)) == (text_only if kept else [])


@needs_cmake
def test_cmake_reply_older_than_the_cmakelists_is_not_used(tmp_path: Path) -> None:
    write(tmp_path, {"CMakeLists.txt": CMAKELISTS})
    configure(tmp_path, "Debug")
    cmakelists = tmp_path / "CMakeLists.txt"
    cmakelists.write_text(CMAKELISTS + "# edited\n")
    text = cmakelists.read_text()
    assert findings(tmp_path, asked(tmp_path)) == [
        (
            "CMakeLists.txt",
            "The build system gave no answer (the build tree was configured before"
            " 'CMakeLists.txt' changed: configure it again to refresh its file-API reply): kernel-opt-level"
            " reads this build's text only, every branch of a conditional included",
            Span.at(0),
            "hint",
        ),
        o3("generated/model.c", text, file="CMakeLists.txt"),
    ]


# ---------------------------------------------------------------------------------------- safety


SHELL_MAKEFILE = "RAN := $(shell touch ran)\nCFLAGS = -O3\nSRCS = " + KERNEL + "\n"


@needs_make
def test_without_the_build_query_nothing_runs(tmp_path: Path) -> None:
    """An untrusted workspace (the query is not enabled): the text reader only, make never runs."""
    write(tmp_path, {"Makefile": SHELL_MAKEFILE})
    assert findings(tmp_path) == [o3(KERNEL, SHELL_MAKEFILE)]
    assert not (tmp_path / "ran").exists()
    findings(tmp_path, asked(tmp_path))
    assert (tmp_path / "ran").exists()  # what `make -pn` does: why it is for trusted workspaces only


@needs_make
def test_a_cmsis_nn_checkouts_own_makefile_is_never_run(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": FILTER_OUT, "CMSIS-NN/Makefile": "X := $(shell touch ../ran)\nall:\n"})
    query = asked(tmp_path)
    assert findings(tmp_path, query) == []
    assert (query.runs, (tmp_path / "ran").exists()) == (1, False)


@needs_make
def test_make_runs_in_a_clean_environment_without_remaking_included_makefiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    makefile = (
        "-include gen.mk\ngen.mk:\n\ttouch remade\nMakefile: Makefile.in\n\ttouch remade-makefile\n"
        'ENV := $(shell echo "$$MAKEFLAGS/$$CC/$$SECRET" > env.txt)\n'
    )
    write(tmp_path, {"Makefile": makefile, "Makefile.in": ""})
    monkeypatch.setenv("MAKEFLAGS", "-j64 --eval=$(shell touch injected)")
    monkeypatch.setenv("CC", "evil-cc")
    monkeypatch.setenv("SECRET", "token")
    result = query_make(tmp_path / "Makefile", tmp_path, ["gen.mk"])
    assert result.problem is None
    assert (tmp_path / "env.txt").read_text() == "//\n"
    assert not (tmp_path / "remade").exists()
    assert not (tmp_path / "remade-makefile").exists()
    assert not (tmp_path / "injected").exists()


def test_make_not_installed_is_a_hint_and_the_text_findings_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"Makefile": SHELL_MAKEFILE})
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-folder"))
    assert findings(tmp_path, asked(tmp_path)) == [
        (
            "Makefile",
            "The build system gave no answer (make is not installed (not on PATH)):"
            " kernel-opt-level reads this build's text only, every branch of a conditional included",
            Span.at(0),
            "hint",
        ),
        o3(KERNEL, SHELL_MAKEFILE),
    ]
    assert not (tmp_path / "ran").exists()


@needs_make
def test_a_makefile_that_stops_is_a_hint_and_the_text_findings_stand(tmp_path: Path) -> None:
    makefile = (
        "CFLAGS = -O3\nSRCS = "
        + KERNEL
        + "\nifeq ($(wildcard model.h),)\n$(error model.h is missing)\nendif\n"
    )
    write(tmp_path, {"Makefile": makefile})
    assert findings(tmp_path, asked(tmp_path)) == [
        (
            "Makefile",
            "The build system gave no answer (make -pn failed: Makefile:4: *** model.h is missing.  Stop.):"
            " kernel-opt-level reads this build's text only, every branch of a conditional included",
            Span.at(0),
            "hint",
        ),
        o3(KERNEL, makefile),
    ]


@needs_make
def test_a_make_that_does_not_finish_is_stopped_and_the_text_findings_stand(tmp_path: Path) -> None:
    makefile = "SLOW := $(shell sleep 30)\nCFLAGS = -O3\nSRCS = " + KERNEL + "\n"
    write(tmp_path, {"Makefile": makefile})
    found = findings(tmp_path, BuildQuery(tmp_path, background=False, timeout=0.5))
    assert [(f[1], f[3]) for f in found] == [
        (
            "The build system gave no answer (make -pn did not finish within 0.5 s):"
            " kernel-opt-level reads this build's text only, every branch of a conditional included",
            "hint",
        ),
        (f"-O3 on kernel sources ({KERNEL}): {O3_RISK}", "warning"),
    ]


@needs_make
def test_a_recursive_make_is_followed_into_its_folder(tmp_path: Path) -> None:
    write(tmp_path, {
        "Makefile": "all:\n\t$(MAKE) -C fw\n",
        "fw/Makefile": "CFLAGS = -O2\nall: k.o\nk.o: ../" + KERNEL + "\n\tcc $(CFLAGS) -O3 -c $< -o $@\n",
    })  # fmt: skip
    result = query_make(tmp_path / "Makefile", tmp_path)
    assert dict(result.compiled) == {KERNEL: (("-O2", "-O3"),)}
    assert result.describes == {(tmp_path / "Makefile").resolve()}  # fw/Makefile is asked on its own


def test_compile_lines_of_a_dry_run() -> None:
    root = Path("/w")
    assert compile_commands(
        'arm-none-eabi-gcc "-DX=a b" -O3 -c src/a.c -o a.o && gcc -c ../b.c', "/w/fw", root
    ) == [
        ("fw/src/a.c", ("-DX=a b", "-O3")),
        ("b.c", ()),
    ]
    assert compile_commands("cc -O2 main.c model.c -o app.elf -lm", "/w", root) == [  # compiled and linked
        ("main.c", ("-O2", "-lm")),
        ("model.c", ("-O2", "-lm")),
    ]
    assert compile_commands("cc -o app.elf a.o b.o; ar rcs lib.a x.o; echo cc a.c", "/w", root) == []
    quoted = "CCACHE_DIR=/c ccache cc '-DX=a;b' -c a.c;echo \"cc b.c\""
    assert compile_commands(quoted, "/w", root) == [("a.c", ("-DX=a;b",))]
    assert compile_commands("cc -c /elsewhere/x.c", "/w", root) == []  # outside the workspace


# ------------------------------------------------------------------------------ cached, off the keystroke


@needs_make
def test_the_server_asks_in_the_background_once_per_version_of_the_build_files(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": FILTER_OUT})
    updated = threading.Event()
    told: list[list[Path]] = []

    def on_update(paths: list[Path]) -> None:  # the server: re-check these build files' findings
        told.append(paths)
        updated.set()

    query = BuildQuery(tmp_path, on_update=on_update)
    index = WorkspaceIndex(
        tmp_path, Project(path=tmp_path / "fixpoint.toml", generated=tmp_path / "generated")
    )
    index.scan()
    enable_build_query(index.cache, query)

    def check() -> list[str]:
        return [f.message for f in kernel_opt_level.check(index.context())]

    text_only = [
        f"-O3 on kernel sources (generated/model.c, {KERNEL}): {O3_RISK}",
        f"-fno-builtin on kernel sources (generated/model.c, {KERNEL}): {BUILTIN_RISK}",
    ]
    assert check() == text_only  # the first check does not wait for make
    assert updated.wait(30) and query.wait(30)
    assert (check(), check(), query.runs) == ([], [], 1)  # the cached answer, make not run again
    assert told == [[(tmp_path / "Makefile").resolve()]]

    index.opened(tmp_path / "Makefile", 1, FILTER_OUT + "# unsaved\n")
    assert (check(), query.runs) == (text_only, 1)  # an unsaved Makefile: its text, and make not asked

    updated.clear()
    (tmp_path / "Makefile").write_text(FILTER_OUT + "# unsaved\n")  # saved
    check()
    assert updated.wait(30) and query.wait(30)
    assert (check(), query.runs) == ([], 2)


@needs_make
def test_the_incremental_checker_takes_the_answer_when_the_build_files_are_marked_changed(
    tmp_path: Path,
) -> None:
    """The server's wiring: on_update marks the described build files changed on disk (index.changed_on_disk)
    and asks for a check; the incremental checker then re-runs kernel-opt-level with the answer."""
    from fixpoint_server.checker import Checker

    write(tmp_path, {"Makefile": FILTER_OUT})
    index = WorkspaceIndex(
        tmp_path, Project(path=tmp_path / "fixpoint.toml", generated=tmp_path / "generated")
    )
    index.scan()
    index.watching = True  # as when the file-system watcher runs: changes come from the index's log
    answered = threading.Event()

    def on_update(paths: list[Path]) -> None:
        for path in paths:
            index.changed_on_disk(path)
        answered.set()

    query = BuildQuery(tmp_path, on_update=on_update)
    enable_build_query(index.cache, query)
    checker = Checker(index, lambda grouped: None, list)

    def flags() -> list[str]:
        return [str(f.data["flag"]) for f in checker.check_rules() if f.code.code == "kernel-opt-level"]

    assert flags() == ["-O3", "-fno-builtin"]  # the text's, while make runs
    assert answered.wait(30) and query.wait(30)
    assert flags() == []
    index.opened(tmp_path / "main.c", 1, "int main(void) { return 1; }\n")  # a keystroke in a C file
    assert (flags(), query.runs) == ([], 1)


# -------------------------------------------------------------------- wired into the server and the CLI


async def _served_makefile_codes(root: Path, trusted: bool, want_empty: bool) -> list[str]:
    """The real server over stdio on `root`: the kernel-opt-level codes published on the Makefile, once
    they settle (trusted: the build's answer arrives from a background thread and re-checks)."""
    import asyncio
    import sys

    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("build-query-test", "1")
    published: dict[str, list[lsp.Diagnostic]] = {}

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: lsp.PublishDiagnosticsParams) -> None:
        published[params.uri] = params.diagnostics

    await client.start_io(sys.executable, "-m", "fixpoint_server", "--stdio")
    try:
        await client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri(),
            initialization_options={"trusted": trusted},
        ))  # fmt: skip
        client.initialized(lsp.InitializedParams())
        uri = (root / "Makefile").as_uri()
        codes: list[str] = []
        for _ in range(60):  # up to 30 s: the first check publishes the text reader's findings
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="fixpoint.checkWorkspace", arguments=[])
            )
            codes = [str(d.code) for d in published.get(uri, []) if d.code == "kernel-opt-level"]
            if (codes == []) == want_empty:
                break
            await asyncio.sleep(0.5)
        await client.shutdown_async(None)
        client.exit(None)
        return codes
    finally:
        await client.stop()


@needs_make
async def test_a_trusted_workspace_asks_make_and_an_untrusted_one_never_does(tmp_path: Path) -> None:
    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    for root in (trusted, untrusted):
        write(root, {"Makefile": "RAN := $(shell touch ran)\n" + FILTER_OUT})
        (root / "fixpoint.toml").write_text('generated = "generated"\n')
    assert await _served_makefile_codes(untrusted, trusted=False, want_empty=False) == [
        "kernel-opt-level",
        "kernel-opt-level",
    ]
    assert not (untrusted / "ran").exists()
    assert await _served_makefile_codes(trusted, trusted=True, want_empty=True) == []
    assert (trusted / "ran").exists()  # make evaluated the Makefile: its $(shell ...) ran


@needs_make
def test_fixpoint_check_asks_make_only_with_build_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from quantcore.cli import main

    write(tmp_path, {"Makefile": "RAN := $(shell touch ran)\n" + FILTER_OUT})
    (tmp_path / "fixpoint.toml").write_text('generated = "generated"\n')
    main(["check", str(tmp_path), "--format", "json"])
    plain = capsys.readouterr().out
    assert plain.count('"kernel-opt-level"') == 2 and not (tmp_path / "ran").exists()
    main(["check", str(tmp_path), "--format", "json", "--build-query"])
    assert '"kernel-opt-level"' not in capsys.readouterr().out and (tmp_path / "ran").exists()
