"""kernel-opt-level and missing-cmsis-nn over small firmware trees: exact places and messages, quick fixes
that make the finding go away, and a clean project that gives nothing."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from fixpoint_server.findings import Code, Finding, Fix, LineIndex, Span
from fixpoint_server.rules import kernel_opt_level, missing_cmsis_nn, run_rules
from fixpoint_server.rules.context import CheckContext, classify

from quantcore.kernels.requantize import Rounding
from quantcore.project import ChecksSettings, Project

MODEL_C = """\
#include "arm_nnfunctions.h"
#include "model.h"

int model_invoke(void)
{
    /* arm_fully_connected_s8() is not called here */
    return (int)arm_convolve_s8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
"""
MAIN_C = '#include "model.h"\n\nint main(void)\n{\n    return model_invoke();\n}\n'
KERNEL_C = (
    '#include "arm_nnfunctions.h"\n\nint arm_convolve_s8(void) { return arm_nn_mat_mult_kernel_s8_s16(); }\n'
)
CALL = Span(6, 16, 6, 31)
"""arm_convolve_s8 in generated/model.c."""

CLEAN_MAKEFILE = """\
CC = arm-none-eabi-gcc
CMSIS_NN ?= CMSIS-NN
CFLAGS = -mcpu=cortex-m4 -mthumb -O2 -I$(CMSIS_NN)/Include -Igenerated
LDFLAGS = -L$(CMSIS_NN)/build
LDLIBS = -lcmsis-nn -lm
SRCS = main.c $(wildcard generated/*.c)

firmware.elf: $(SRCS:.c=.o)
\t$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
"""


def write_tree(root: Path, files: dict[str, str]) -> None:
    base = {
        "main.c": MAIN_C,
        "generated/model.c": MODEL_C,
        "generated/model.h": "int model_invoke(void);\n",
        "CMSIS-NN/Include/arm_nnfunctions.h": "int arm_convolve_s8(void);\n",
        "CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c": KERNEL_C,
    }
    for rel, text in {**base, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if text:
            path.write_text(text)
        elif path.exists():
            path.unlink()


def context(root: Path, **settings: Any) -> CheckContext:
    files = {p: kind for p in sorted(root.rglob("*")) if p.is_file() and (kind := classify(p)) is not None}
    project = Project(path=root / "fixpoint.toml", generated=root / "generated", **settings)
    return CheckContext(root, project, files=files, read=lambda p: p.read_text())


def check(root: Path, **settings: Any) -> list[Finding]:
    ctx = context(root, **settings)
    return sorted([*kernel_opt_level.check(ctx), *missing_cmsis_nn.check(ctx)], key=Finding.sort_key)


def apply(fix: Fix) -> None:
    """Apply a quick fix's edits the way an editor does (all offsets from the text before the fix)."""
    by_path: dict[Path, list[Any]] = defaultdict(list)
    for edit in fix.edits:
        by_path[edit.path].append(edit)
    for path, edits in by_path.items():
        text = path.read_text()
        index = LineIndex(text)
        for edit in sorted(edits, key=lambda e: (e.span.line, e.span.column), reverse=True):
            start = index.offset(edit.span.line, edit.span.column)
            end = index.offset(edit.span.end_line, edit.span.end_column)
            text = text[:start] + edit.new_text + text[end:]
        path.write_text(text)


def at(text: str, needle: str, nth: int = 0) -> Span:
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    return LineIndex(text).span(start, start + len(needle))


def fix_named(finding: Finding, title: str) -> Fix:
    return next(f for f in finding.fixes if f.title == title)


# ------------------------------------------------------------------------------------ clean project


def test_clean_makefile_project_gives_nothing(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": CLEAN_MAKEFILE})
    ctx = context(tmp_path)
    assert run_rules(ctx, only=[Code.KERNEL_OPT_LEVEL, Code.MISSING_CMSIS_NN]) == []


# ---------------------------------------------------------------------------------- kernel-opt-level

FLAG_MAKEFILE = CLEAN_MAKEFILE.replace("-O2", "{flag}")


@pytest.mark.parametrize(
    ("flag", "risk", "title", "after"),
    [
        (
            "-O3",
            "auto-vectorisation is reported to break fixed-point kernels",
            "Use -O1 for kernel sources",
            "-O1",
        ),
        ("-Ofast", "plus -ffast-math", "Use -O1 for kernel sources", "-O1"),
        ("-O0", "no speed-up from CMSIS-NN", "Use -O1 for kernel sources", "-O1"),
        ("-fno-builtin", "memcpy/memset being inlined", "Remove -fno-builtin", ""),
        ("-ffreestanding", "implies -fno-builtin", "Remove -ffreestanding", ""),
        ("-fno-omit-frame-pointer", "CMSIS-NN's inline assembly uses", "Remove -fno-omit-frame-pointer", ""),
    ],
)
def test_each_forbidden_flag_on_global_cflags(
    tmp_path: Path, flag: str, risk: str, title: str, after: str
) -> None:
    makefile = FLAG_MAKEFILE.replace("{flag}", flag)
    write_tree(tmp_path, {"Makefile": makefile})
    (finding,) = check(tmp_path)
    assert finding.code is Code.KERNEL_OPT_LEVEL
    assert (finding.path, finding.span) == (tmp_path / "Makefile", at(makefile, flag))
    assert finding.message.startswith(f"{flag} on kernel sources (generated/model.c): ")
    assert risk in finding.message
    assert [f.title for f in finding.fixes] == [title]
    apply(finding.fixes[0])
    expected = "CFLAGS = -mcpu=cortex-m4 -mthumb -O1 -I" if after else "CFLAGS = -mcpu=cortex-m4 -mthumb -I"
    assert expected in (tmp_path / "Makefile").read_text()
    assert check(tmp_path) == []


def test_flag_through_a_variable_and_cmsis_sources(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace("-O2", "$(OPT)").replace(
        "SRCS = main.c", "OPT = -O3\nSRCS = main.c $(wildcard CMSIS-NN/Source/*/*.c)"
    )
    write_tree(tmp_path, {"Makefile": makefile})
    (finding,) = check(tmp_path)
    assert finding.span == Span(5, 6, 5, 9)
    assert "(CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c, generated/model.c)" in finding.message
    assert finding.data["context"] == "OPT"


def test_later_per_directory_level_wins(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace("-O2", "-O3").replace(
        "SRCS = main.c", "SRCS = main.c $(wildcard CMSIS-NN/Source/*/*.c)"
    )
    write_tree(tmp_path, {"Makefile": makefile + "\nCMSIS-NN/%.o: CFLAGS += -O1\n"})
    (finding,) = check(tmp_path)
    assert "(generated/model.c)" in finding.message  # CMSIS-NN's own sources get -O1
    (tmp_path / "Makefile").write_text(
        makefile + "\nCMSIS-NN/%.o: CFLAGS += -O1\ngenerated/%.o: CFLAGS += -O1\n"
    )
    assert check(tmp_path) == []


def test_flags_that_reach_no_kernel_are_fine(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace(
        "SRCS = main.c $(wildcard generated/*.c)", "SRCS = main.c\nmain.o: CFLAGS += -O3"
    )
    write_tree(tmp_path, {"Makefile": makefile + "src/%.o: CFLAGS += -fno-builtin\n"})
    assert [f for f in check(tmp_path) if f.code is Code.KERNEL_OPT_LEVEL] == []


def test_target_specific_value_on_kernel_objects(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE + "generated/%.o: CFLAGS += -fno-omit-frame-pointer\n"
    write_tree(tmp_path, {"Makefile": makefile})
    (finding,) = check(tmp_path)
    assert finding.span == Span(9, 25, 9, 48)
    assert "r7" in finding.message and "(generated/model.c)" in finding.message
    apply(finding.fixes[0])
    assert (tmp_path / "Makefile").read_text().endswith("generated/%.o: CFLAGS +=\n")
    assert check(tmp_path) == []


def test_object_lists_stand_for_their_sources(tmp_path: Path) -> None:
    objects = "OBJS = build/main.o build/generated/model.o"
    makefile = BARE_MAKEFILE.replace("SRCS = main.c generated/model.c", objects)
    makefile = makefile.replace("-O2", "-O3").replace("$(SRCS:.c=.o)", "$(OBJS)")
    write_tree(tmp_path, {"Makefile": makefile + "LDLIBS = -lcmsis-nn\nCFLAGS += -ICMSIS-NN/Include\n"})
    (finding,) = check(tmp_path)
    assert finding.message.startswith("-O3 on kernel sources (generated/model.c): ")


def test_flags_in_an_included_makefile(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace("-O2 ", "") + "include config.mk\n"
    write_tree(tmp_path, {"Makefile": makefile, "config.mk": "# toolchain settings\nOPT ?= -Ofast\n"})
    (finding,) = check(tmp_path)
    assert (finding.path, finding.span) == (tmp_path / "config.mk", Span(1, 7, 1, 13))
    assert "(generated/model.c)" in finding.message


def test_recipe_flag_on_explicit_kernel_file(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE + "generated/model.o: generated/model.c\n\t$(CC) $(CFLAGS) -Ofast -c $< -o $@\n"
    write_tree(tmp_path, {"Makefile": makefile})
    (finding,) = check(tmp_path)
    assert finding.span == Span(10, 17, 10, 23)
    apply(finding.fixes[0])
    assert "\t$(CC) $(CFLAGS) -O1 -c $< -o $@" in (tmp_path / "Makefile").read_text()
    assert check(tmp_path) == []


CMAKE = """\
cmake_minimum_required(VERSION 3.20)
project(fw C)
file(GLOB MODEL_SRCS generated/*.c)
add_executable(app main.c ${MODEL_SRCS})
target_include_directories(app PRIVATE CMSIS-NN/Include generated)
target_link_libraries(app PRIVATE cmsis-nn)
target_compile_options(app PRIVATE -O2)
"""


def test_cmake_source_properties_and_target_options(tmp_path: Path) -> None:
    cmake = CMAKE + 'set_source_files_properties(${MODEL_SRCS} PROPERTIES COMPILE_OPTIONS "-O3")\n'
    write_tree(tmp_path, {"CMakeLists.txt": cmake})
    (finding,) = check(tmp_path)
    assert finding.span == at(cmake, "-O3")
    assert finding.message.startswith("-O3 on kernel sources (generated/model.c)")
    apply(finding.fixes[0])
    assert check(tmp_path) == []


def test_cmake_options_on_a_target_without_kernels_are_fine(tmp_path: Path) -> None:
    cmake = CMAKE.replace("main.c ${MODEL_SRCS}", "main.c").replace("-O2", "-O3")
    cmake += "add_library(model STATIC ${MODEL_SRCS})\ntarget_link_libraries(app PRIVATE model)\n"
    write_tree(tmp_path, {"CMakeLists.txt": cmake})
    assert check(tmp_path) == []


def test_cmake_subdirectory_gets_cmsis_default_ofast(tmp_path: Path) -> None:
    cmake = CMAKE.replace("project(fw C)\n", "project(fw C)\n  add_subdirectory(CMSIS-NN)\n")
    write_tree(tmp_path, {"CMakeLists.txt": cmake, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    (finding,) = check(tmp_path)
    assert (finding.path, finding.span) == (tmp_path / "CMakeLists.txt", Span(2, 19, 2, 27))
    assert "CMSIS_OPTIMIZATION_LEVEL, -Ofast unless set" in finding.message
    apply(finding.fixes[0])
    text = (tmp_path / "CMakeLists.txt").read_text()
    assert (
        '  set(CMSIS_OPTIMIZATION_LEVEL "-O1" CACHE STRING "CMSIS-NN -O level" FORCE)\n  add_subdirectory'
        in text
    )
    assert check(tmp_path) == []


CMSIS_NN_CMAKE = """\
set(CMSIS_OPTIMIZATION_LEVEL "-Ofast" CACHE STRING "Compiler optimization level.")
project(CMSISNN C)
add_library(cmsis-nn STATIC Source/ConvolutionFunctions/arm_convolve_s8.c)
target_compile_options(cmsis-nn PRIVATE ${CMSIS_OPTIMIZATION_LEVEL})
target_include_directories(cmsis-nn PUBLIC Include)
"""


def test_cmake_level_set_on_cmsis_target(tmp_path: Path) -> None:
    cmake = CMAKE.replace(
        "project(fw C)\n", 'project(fw C)\nset(CMSIS_OPTIMIZATION_LEVEL "-O3")\nadd_subdirectory(CMSIS-NN)\n'
    )
    write_tree(tmp_path, {"CMakeLists.txt": cmake, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    (finding,) = check(tmp_path)
    assert finding.span == Span(2, 30, 2, 33)
    assert finding.message.startswith("-O3 on kernel sources (target cmsis-nn)")
    apply(finding.fixes[0])
    assert check(tmp_path) == []


def test_compile_commands_only(tmp_path: Path) -> None:
    entries = [
        {"directory": str(tmp_path), "file": "generated/model.c", "command": "gcc -O3 -c generated/model.c"},
        {"directory": str(tmp_path), "file": "main.c", "command": "gcc -O3 -ICMSIS-NN/Include -c main.c"},
        {"directory": str(tmp_path), "file": "CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c",
         "command": "gcc -O3 -c CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c"},
    ]  # fmt: skip
    text = json.dumps(entries, indent=2)
    write_tree(tmp_path, {"build/compile_commands.json": text})
    (finding,) = check(tmp_path)
    assert (finding.path, finding.span) == (tmp_path / "build" / "compile_commands.json", at(text, "-O3"))
    assert "(generated/model.c, CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c)" in finding.message
    assert "compile_commands.json is generated" in finding.message
    assert finding.fixes == () and [r.span for r in finding.related] == [at(text, "-O3", 2)]


def test_compile_commands_not_repeated_when_the_makefile_says_it(tmp_path: Path) -> None:
    entries = [
        {"directory": str(tmp_path), "file": "generated/model.c", "arguments": ["gcc", "-O3", "-c", "x.c"]}
    ]
    write_tree(
        tmp_path,
        {"Makefile": FLAG_MAKEFILE.replace("{flag}", "-O3"), "compile_commands.json": json.dumps(entries)},
    )
    (finding,) = check(tmp_path)
    assert finding.path == tmp_path / "Makefile"


def test_platformio_build_flags(tmp_path: Path) -> None:
    ini = "[env:nucleo]\nplatform = ststm32\nbuild_flags =\n    -O3\n    -ICMSIS-NN/Include\n"
    ini += "lib_deps = CMSIS-NN\n"
    write_tree(tmp_path, {"platformio.ini": ini, "src/model/model.c": MODEL_C, "generated/model.c": ""})
    ctx_settings = {"generated": tmp_path / "src" / "model"}
    ctx = CheckContext(tmp_path, Project(path=tmp_path / "fixpoint.toml", **ctx_settings),
                       files=context(tmp_path).files, read=lambda p: p.read_text())  # fmt: skip
    (finding,) = kernel_opt_level.check(ctx)
    assert finding.span == Span(3, 4, 3, 7)
    assert "(src/model/model.c, CMSIS-NN (lib_deps))" in finding.message  # build_flags reach libraries too
    assert missing_cmsis_nn.check(ctx) == []


def test_custom_policy(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": FLAG_MAKEFILE.replace("{flag}", "-O2")})
    (finding,) = check(tmp_path, checks=ChecksSettings(forbidden_flags=("-O2",)))
    assert "-O2 is forbidden on kernel sources by fixpoint.toml's [checks] forbidden_flags" in finding.message
    assert finding.fixes[0].title == "Use -O1 for kernel sources"
    assert check(tmp_path, checks=ChecksSettings(forbidden_flags=("-Os",))) == []


def test_vendored_cmsis_nn_build_files_are_not_checked(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": CLEAN_MAKEFILE, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    assert check(tmp_path) == []


# ----------------------------------------------------------------------------------------- rounding

CMSIS_SRC_MAKEFILE = CLEAN_MAKEFILE.replace(
    "SRCS = main.c $(wildcard generated/*.c)",
    "SRCS = main.c $(wildcard generated/*.c $(CMSIS_NN)/Source/*/*.c)",
)


def test_single_rounding_defined_for_a_double_project(tmp_path: Path) -> None:
    makefile = CMSIS_SRC_MAKEFILE.replace("-O2", "-O2 -DCMSIS_NN_USE_SINGLE_ROUNDING")
    write_tree(tmp_path, {"Makefile": makefile})
    (finding,) = check(tmp_path)
    assert finding.span == at(makefile, "-DCMSIS_NN_USE_SINGLE_ROUNDING")
    assert "the parameters were computed for double rounding" in finding.message
    assert "differ from the reference in the last bit" in finding.message
    apply(finding.fixes[0])
    assert (tmp_path / "Makefile").read_text() == CMSIS_SRC_MAKEFILE
    assert check(tmp_path) == []


def test_single_rounding_missing_for_a_single_project(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": CMSIS_SRC_MAKEFILE})
    (finding,) = check(tmp_path, rounding=Rounding.SINGLE)
    assert finding.span == at(CMSIS_SRC_MAKEFILE, "$(CMSIS_NN)/Source/*/*.c")
    assert "CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c" in finding.message
    assert 'rounding = "single", but CMSIS_NN_USE_SINGLE_ROUNDING is not defined' in finding.message
    apply(finding.fixes[0])
    assert "-Igenerated -DCMSIS_NN_USE_SINGLE_ROUNDING\n" in (tmp_path / "Makefile").read_text()
    assert check(tmp_path, rounding=Rounding.SINGLE) == []


def test_single_rounding_with_a_prebuilt_library_is_not_known(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": CLEAN_MAKEFILE})
    assert check(tmp_path, rounding=Rounding.SINGLE) == []


def test_single_rounding_cmake_inserts_before_the_subdirectory(tmp_path: Path) -> None:
    cmake = CMAKE.replace(
        "project(fw C)\n", 'project(fw C)\nset(CMSIS_OPTIMIZATION_LEVEL "-O1")\nadd_subdirectory(CMSIS-NN)\n'
    )
    write_tree(tmp_path, {"CMakeLists.txt": cmake, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    (finding,) = check(tmp_path, rounding=Rounding.SINGLE)
    assert finding.span == Span(3, 17, 3, 25)
    apply(finding.fixes[0])
    assert (
        "add_compile_definitions(CMSIS_NN_USE_SINGLE_ROUNDING)\nadd_subdirectory(CMSIS-NN)"
        in (tmp_path / "CMakeLists.txt").read_text()
    )
    assert check(tmp_path, rounding=Rounding.SINGLE) == []


# -------------------------------------------------------------------------------- missing-cmsis-nn

BARE_MAKEFILE = """\
CC = arm-none-eabi-gcc
CFLAGS = -mcpu=cortex-m4 -O2 -Igenerated
SRCS = main.c generated/model.c

firmware.elf: $(SRCS:.c=.o)
\t$(CC) $^ -o $@
"""


def test_makefile_without_cmsis_nn(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": BARE_MAKEFILE})
    on_build, on_call = check(tmp_path)  # sorted by path: Makefile before generated/model.c
    assert (on_build.code, on_build.path, on_build.span) == (
        Code.MISSING_CMSIS_NN,
        tmp_path / "Makefile",
        Span(1, 0, 1, 6),
    )
    assert on_build.message.startswith(
        "arm_convolve_s8 (generated/model.c:7) needs CMSIS-NN, but no build file links"
    )
    assert "and no build file adds CMSIS-NN's Include folder" in on_build.message
    assert (on_call.path, on_call.span) == (tmp_path / "generated" / "model.c", CALL)
    assert on_call.message.startswith("arm_convolve_s8 is a CMSIS-NN kernel, but no build file links it")
    assert on_call.related[0].path == tmp_path / "Makefile"
    titles = [f.title for f in on_build.fixes]
    assert titles == [
        "Add CMSIS-NN's library and include path",
        "Link CMSIS-NN (-lcmsis-nn)",
        "Add CMSIS-NN's include path ($(CMSIS_NN)/Include)",
    ]
    assert on_call.fixes == on_build.fixes
    apply(on_build.fixes[0])
    text = (tmp_path / "Makefile").read_text()
    assert "CFLAGS = -mcpu=cortex-m4 -O2 -Igenerated -I$(CMSIS_NN)/Include\n" in text
    assert text.endswith("\t$(CC) $^ -o $@\nLDLIBS += -lcmsis-nn\n")
    assert check(tmp_path) == []


def test_only_the_include_path_missing(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace(" -I$(CMSIS_NN)/Include", "")
    write_tree(tmp_path, {"Makefile": makefile})
    on_build, _ = check(tmp_path, cmsis_nn=tmp_path / "CMSIS-NN")
    assert on_build.span == Span(2, 0, 2, 6)  # CFLAGS, where -I goes
    assert on_build.message.endswith("no build file adds CMSIS-NN's Include folder to the include path:"
                                     " arm_nnfunctions.h is not found")  # fmt: skip
    (fix,) = on_build.fixes
    assert fix.title == "Add CMSIS-NN's include path (CMSIS-NN/Include)"
    (edit,) = fix.edits
    assert edit.span == Span.at(2, len("CFLAGS = -mcpu=cortex-m4 -mthumb -O2 -Igenerated"))
    assert edit.new_text == " -ICMSIS-NN/Include"
    apply(fix)
    assert check(tmp_path, cmsis_nn=tmp_path / "CMSIS-NN") == []


def test_only_the_library_missing(tmp_path: Path) -> None:
    makefile = CLEAN_MAKEFILE.replace("LDLIBS = -lcmsis-nn -lm", "LDLIBS = -lm  # maths")
    write_tree(tmp_path, {"Makefile": makefile})
    on_build, _ = check(tmp_path)
    assert on_build.span == Span(4, 0, 4, 6)
    assert "the link fails with undefined references" in on_build.message
    (fix,) = on_build.fixes
    apply(fix)
    assert "LDLIBS = -lm -lcmsis-nn  # maths\n" in (tmp_path / "Makefile").read_text()
    assert check(tmp_path) == []


def test_compiling_cmsis_nn_sources_counts_as_linking(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": CMSIS_SRC_MAKEFILE.replace("LDLIBS = -lcmsis-nn -lm", "LDLIBS = -lm")})
    assert check(tmp_path) == []


def test_cmake_without_cmsis_nn(tmp_path: Path) -> None:
    cmake = "cmake_minimum_required(VERSION 3.20)\nproject(fw C)\n"
    cmake += "add_executable(app\n  main.c\n  generated/model.c)\n"
    write_tree(tmp_path, {"CMakeLists.txt": cmake})
    on_build = next(f for f in check(tmp_path) if f.path.name == "CMakeLists.txt")
    assert on_build.span == Span(2, 0, 2, len("add_executable"))
    apply(on_build.fixes[0])
    text = (tmp_path / "CMakeLists.txt").read_text()
    assert text.endswith(
        "  generated/model.c)\ntarget_link_libraries(app PRIVATE cmsis-nn)\n"
        "target_include_directories(app PRIVATE ${CMSIS_NN}/Include)\n"
    )
    assert check(tmp_path) == []


def test_cmake_subdirectory_target_carries_the_include_path(tmp_path: Path) -> None:
    cmake = CMAKE.replace("CMSIS-NN/Include ", "").replace(
        "project(fw C)\n", 'project(fw C)\nset(CMSIS_OPTIMIZATION_LEVEL "-O1")\nadd_subdirectory(CMSIS-NN)\n'
    )
    write_tree(tmp_path, {"CMakeLists.txt": cmake, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    assert check(tmp_path) == []


def test_cmake_existing_link_statement_is_extended(tmp_path: Path) -> None:
    cmake = CMAKE.replace("PRIVATE cmsis-nn", "PRIVATE m")
    write_tree(tmp_path, {"CMakeLists.txt": cmake})
    on_build = next(f for f in check(tmp_path) if f.path.name == "CMakeLists.txt")
    assert on_build.span == Span(5, 0, 5, len("target_link_libraries"))
    apply(on_build.fixes[0])
    assert "target_link_libraries(app PRIVATE m cmsis-nn)\n" in (tmp_path / "CMakeLists.txt").read_text()
    assert check(tmp_path) == []


def test_platformio_without_cmsis_nn(tmp_path: Path) -> None:
    ini = "[env:nucleo]\nplatform = ststm32\nboard = nucleo_f746zg\n"
    write_tree(
        tmp_path, {"platformio.ini": ini, "CMSIS-NN/Source/ConvolutionFunctions/arm_convolve_s8.c": ""}
    )
    on_build = next(f for f in check(tmp_path) if f.path.name == "platformio.ini")
    assert on_build.span == Span(2, 0, 2, len("board = nucleo_f746zg"))  # no statement to point at: the end
    apply(on_build.fixes[0])
    expected = "[env:nucleo]\nbuild_flags = -lcmsis-nn -I${sysenv.CMSIS_NN}/Include\nplatform = ststm32\n"
    assert (tmp_path / "platformio.ini").read_text().startswith(expected)
    assert check(tmp_path) == []


def test_header_include_without_calls(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": BARE_MAKEFILE, "generated/model.c": '#include "arm_nnfunctions.h"\n'})
    _, on_call = check(tmp_path)
    assert on_call.span == Span(0, 0, 0, 28)
    assert on_call.message.startswith("arm_nnfunctions.h is CMSIS-NN's header, but")


def test_nothing_to_check(tmp_path: Path) -> None:
    write_tree(tmp_path, {})
    assert check(tmp_path) == []  # no build files at all
    write_tree(
        tmp_path, {"Makefile": BARE_MAKEFILE, "generated/model.c": "int model_invoke(void) { return 0; }\n"}
    )
    assert check(tmp_path) == []  # no CMSIS-NN calls


def test_cmsis_nn_own_build_file_is_no_evidence(tmp_path: Path) -> None:
    write_tree(tmp_path, {"Makefile": BARE_MAKEFILE, "CMSIS-NN/CMakeLists.txt": CMSIS_NN_CMAKE})
    assert {f.path.name for f in check(tmp_path)} == {"Makefile", "model.c"}


def test_regex_fallback_without_the_c_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path, {"Makefile": BARE_MAKEFILE})
    ctx = context(tmp_path)

    def no_scanner(path: Path) -> None:
        raise ModuleNotFoundError("no c_source", name="fixpoint_server.parse.c_source")

    monkeypatch.setattr(ctx, "c_file", no_scanner)
    site = missing_cmsis_nn.first_call_site(ctx)
    assert site is not None and (site.path.name, site.span, site.name) == ("model.c", CALL, "arm_convolve_s8")
