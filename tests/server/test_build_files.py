"""The build-file reader: every flag scope form of Make, CMake, compile_commands.json and platformio.ini,
with exact spans, and no exception on any text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from fixpoint_server.findings import LineIndex, Span
from fixpoint_server.parse.build_files import (
    ALL,
    BuildFacts,
    BuildKind,
    LibraryKind,
    Scope,
    ScopeKind,
    SourceKind,
    glob_match,
    in_cmsis_nn,
    parse_build_file,
    pattern_covers,
)

ROOT = Path("/fw")


def at(text: str, needle: str, nth: int = 0) -> Span:
    """The span of the nth occurrence of `needle` in `text`."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    return LineIndex(text).span(start, start + len(needle))


def flags(facts: BuildFacts, flag: str) -> list[tuple[Span, Scope, str]]:
    return [(f.span, f.scope, f.context) for f in facts.flags if f.flag == flag]


def cut(text: str, span: Span) -> str:
    index = LineIndex(text)
    return text[index.offset(span.line, span.column) : index.offset(span.end_line, span.end_column)]


# ---------------------------------------------------------------------------------------------- make

MAKEFILE = """\
# Cortex-M7 firmware, CMSIS-NN from a checkout next to it
CMSIS_NN ?= ../CMSIS-NN
OPT = -O3
CFLAGS = -mcpu=cortex-m7 $(OPT) -Wall \\
\t-ffreestanding -DCMSIS_NN_USE_SINGLE_ROUNDING
# CFLAGS += -O0   (a comment, not a flag)
INC = -I./CMSIS/NN/Include -I $(CMSIS_NN)/Include
LDFLAGS = -O3 -Wl,--gc-sections
LDLIBS = -L./CMSIS/NN/Lib/GCC -lcmsisnn lib/libextra.a  # prebuilt
SRCS = main.c $(wildcard generated/*.c) $(wildcard $(CMSIS_NN)/Source/*/*.c)
OBJS = $(SRCS:.c=.o)
include toolchain.mk

CMSIS-NN/%.o: CFLAGS += -O1
kernels.o: CFLAGS += -fno-omit-frame-pointer
firmware.elf: CFLAGS += -g

firmware.elf: $(OBJS)
\t$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

build/%.o: src/%.c
\t@$(CC) $(CFLAGS) $(INC) -Ofast -c $< -o $@

generated/model.o:
\tarm-none-eabi-gcc -O0 -c generated/model.c -o generated/model.o
"""


@pytest.fixture(scope="module")
def make() -> BuildFacts:
    return parse_build_file(ROOT / "Makefile", MAKEFILE)


def test_make_kind_and_no_problems(make: BuildFacts) -> None:
    assert make.kind is BuildKind.MAKE
    assert make.problems == ()


def test_make_global_flags_with_continuation(make: BuildFacts) -> None:
    assert flags(make, "-ffreestanding")[0] == (Span(4, 1, 4, 15), ALL, "CFLAGS")
    assert flags(make, "-mcpu=cortex-m7")[0] == (at(MAKEFILE, "-mcpu=cortex-m7"), ALL, "CFLAGS")


def test_make_flag_through_a_variable_is_reported_where_written(make: BuildFacts) -> None:
    uses = flags(make, "-O3")
    assert {u[0] for u in uses} == {Span(2, 6, 2, 9)}  # OPT's -O3; LDFLAGS' -O3 is a link flag
    scopes = {u[1] for u in uses}
    assert ALL in scopes  # CFLAGS, read by make's built-in rules
    assert Scope.files("src/**.c") in scopes  # the explicit recipe that also uses $(CFLAGS)
    assert all(u[2] == "OPT" for u in uses)


def test_make_comment_is_not_a_flag(make: BuildFacts) -> None:
    assert flags(make, "-O0") == [(at(MAKEFILE, "-O0", 1), Scope.files("generated/model.c"), "recipe")]


def test_make_target_and_pattern_specific_values(make: BuildFacts) -> None:
    assert flags(make, "-O1") == [(Span(13, 24, 13, 27), Scope.files("CMSIS-NN/**.o"), "CFLAGS")]
    assert flags(make, "-fno-omit-frame-pointer")[0][1] == Scope.files("kernels.o")
    assert flags(make, "-g")[0][1] == Scope.of_target("firmware.elf")


def test_make_recipe_flags_scope_the_rule_sources(make: BuildFacts) -> None:
    assert flags(make, "-Ofast") == [(at(MAKEFILE, "-Ofast"), Scope.files("src/**.c"), "recipe")]


def test_make_removal_takes_one_blank(make: BuildFacts) -> None:
    use = next(f for f in make.flags if f.flag == "-Ofast")
    assert cut(MAKEFILE, use.removal) == "-Ofast "


def test_make_paths_libraries_definitions(make: BuildFacts) -> None:
    assert [(i.path_text, i.expanded) for i in make.include_dirs if i.scope == Scope.files("src/**.c")] == [
        ("./CMSIS/NN/Include", "CMSIS/NN/Include"),
        ("$(CMSIS_NN)/Include", "../CMSIS-NN/Include"),
    ]
    assert at(MAKEFILE, "-I $(CMSIS_NN)/Include") in {i.span for i in make.include_dirs}
    libs = {(lib.name, lib.kind) for lib in make.libraries}
    assert libs == {("cmsisnn", LibraryKind.FLAG), ("extra", LibraryKind.ARCHIVE)}
    assert [d.path_text for d in make.library_dirs] == ["./CMSIS/NN/Lib/GCC"]
    (single,) = {(d.name, d.value, d.span) for d in make.definitions}
    assert single == ("CMSIS_NN_USE_SINGLE_ROUNDING", None, at(MAKEFILE, "-DCMSIS_NN_USE_SINGLE_ROUNDING"))


def test_make_sources_and_includes(make: BuildFacts) -> None:
    sources = {(s.path_text, s.expanded, s.kind) for s in make.sources}
    assert ("main.c", "main.c", SourceKind.FILE) in sources
    assert ("generated/*.c", "generated/*.c", SourceKind.GLOB) in sources
    assert ("$(CMSIS_NN)/Source/*/*.c", "../CMSIS-NN/Source/*/*.c", SourceKind.GLOB) in sources
    assert ("generated/model.c", "generated/model.c", SourceKind.FILE) in sources
    objects = {(s.path_text, s.expanded) for s in make.sources if s.expanded.endswith(".o")}
    assert ("$(SRCS:.c=.o)", "generated/*.o") in objects  # an object stands for its source
    assert [(i.path_text, i.span) for i in make.includes] == [("toolchain.mk", Span(11, 8, 11, 20))]


def test_make_statements_give_append_points(make: BuildFacts) -> None:
    (ldlibs,) = make.statements_named("LDLIBS")
    assert ldlibs.append_at == Span.at(8, len("LDLIBS = -L./CMSIS/NN/Lib/GCC -lcmsisnn lib/libextra.a"))
    assert ldlibs.name_span == Span(8, 0, 8, 6)
    (cflags,) = make.statements_named("CFLAGS", None)[:1]
    assert cflags.append_at == Span.at(4, len("\t-ffreestanding -DCMSIS_NN_USE_SINGLE_ROUNDING"))
    assert [s.target for s in make.statements_named("CFLAGS")] == [
        None,
        "CMSIS-NN/%.o",
        "kernels.o",
        "firmware.elf",
    ]


def test_make_config_file_flags_without_consumers() -> None:
    text = "OPT := -Ofast\nCOMMON_FLAGS = -fno-builtin\nUNUSED = -O0\n"
    facts = parse_build_file(ROOT / "config.mk", text)
    assert {f.flag for f in facts.flags} == {"-Ofast", "-fno-builtin"}  # flag-named variables, read elsewhere
    assert all(f.scope == ALL for f in facts.flags)


def test_make_functions_name_sources() -> None:
    text = (
        "DIR := third_party/CMSIS-NN\n"
        "A = $(addprefix generated/,model.c weights.c)\n"
        "B = $(shell find $(DIR)/Source -name '*.c')\n"
        "C := $(patsubst %.c,%.o,$(A))\n"
    )
    facts = parse_build_file(ROOT / "Makefile", text)
    expanded = {(s.expanded, s.kind) for s in facts.sources}
    assert ("generated/model.c", SourceKind.FILE) in expanded
    assert ("generated/weights.c", SourceKind.FILE) in expanded
    assert ("third_party/CMSIS-NN/Source/**", SourceKind.GLOB) in expanded


def test_make_define_blocks_and_conditionals() -> None:
    text = (
        "define COMPILE\n\t$(CC) -O3 -c $< -o $@\nendef\n"
        "ifeq ($(DEBUG),1)\nCFLAGS += -O0\nelse\nCFLAGS += -O2\nendif\n"
    )
    facts = parse_build_file(ROOT / "Makefile", text)
    assert [(f.flag, f.span.line) for f in facts.flags] == [
        ("-O0", 4),
        ("-O2", 6),
    ]  # both branches, no macro body


@pytest.mark.parametrize(
    "text",
    [
        "CFLAGS = $(foo\n\t\tgcc -O3 $(\n",
        "a: b: c: d ; $(CC) -O3\n::::\n=\n+=\n",
        "CFLAGS = \\",
        "\\\n\\\n#\\\n",
        "$(eval $(call X,$(Y)))\n" * 3,
        "A = $(A) $(A:.c=.o)\nCFLAGS = $(A)\nB = $(B:%=%)\n",  # self references must not loop
        "x" * 100_000,
    ],
)
def test_make_broken_text_never_raises(text: str) -> None:
    facts = parse_build_file(ROOT / "Makefile", text)
    assert facts.kind is BuildKind.MAKE


# --------------------------------------------------------------------------------------------- cmake

CMAKE = """\
cmake_minimum_required(VERSION 3.20)
project(fw C)
set(CMSIS_NN ${CMAKE_CURRENT_SOURCE_DIR}/third_party/CMSIS-NN)
set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -O3 -mcpu=cortex-m4")
string(APPEND CMAKE_C_FLAGS " -fno-builtin")
add_compile_options(-Wall $<$<CONFIG:Release>:-Ofast>)
file(GLOB MODEL_SRCS CONFIGURE_DEPENDS generated/*.c)
add_subdirectory(${CMSIS_NN} cmsis-nn)  # builds the cmsis-nn target
add_executable(app main.c ${MODEL_SRCS})
target_compile_options(app PRIVATE "-O0" -g)
set_source_files_properties(${MODEL_SRCS} PROPERTIES COMPILE_OPTIONS "-O1;-fno-omit-frame-pointer")
set_source_files_properties(kernels.c PROPERTIES COMPILE_FLAGS "-O2 -ffreestanding")
target_link_libraries(app PRIVATE cmsis-nn m ${CMAKE_CURRENT_SOURCE_DIR}/lib/libcmsisnn.a -lfoo)
target_include_directories(app PRIVATE ${CMSIS_NN}/Include)
include_directories(SYSTEM include)
target_compile_definitions(app PRIVATE CMSIS_NN_USE_SINGLE_ROUNDING ARM_MATH_DSP=1)
add_definitions(-DFOO -ffast-math)
#[[ add_compile_options(-O3)
]]
set(CMSIS_OPTIMIZATION_LEVEL "-O2" CACHE STRING "" FORCE)
include(cmake/toolchain.cmake)
"""


@pytest.fixture(scope="module")
def cmake() -> BuildFacts:
    return parse_build_file(ROOT / "CMakeLists.txt", CMAKE)


def test_cmake_flag_variables_and_directory_options(cmake: BuildFacts) -> None:
    assert flags(cmake, "-O3") == [(at(CMAKE, "-O3"), ALL, "CMAKE_C_FLAGS")]  # not the one in the comment
    assert flags(cmake, "-fno-builtin") == [(at(CMAKE, "-fno-builtin"), ALL, "CMAKE_C_FLAGS")]
    assert flags(cmake, "-Ofast") == [(at(CMAKE, "-Ofast"), ALL, "add_compile_options")]  # inside a genex


def test_cmake_target_and_source_options(cmake: BuildFacts) -> None:
    assert flags(cmake, "-O0") == [(at(CMAKE, "-O0"), Scope.of_target("app"), "target_compile_options")]
    context = "set_source_files_properties COMPILE_OPTIONS"
    assert flags(cmake, "-O1") == [(at(CMAKE, "-O1"), Scope.files("generated/*.c"), context)]
    assert flags(cmake, "-ffreestanding")[0][1] == Scope.files("kernels.c")
    assert flags(cmake, "-O2")[0] == (
        at(CMAKE, "-O2"),
        Scope.files("kernels.c"),
        "set_source_files_properties COMPILE_FLAGS",
    )
    assert flags(cmake, "-O2")[1] == (
        Span(19, 30, 19, 33),
        Scope.of_target("cmsis-nn"),
        "CMSIS_OPTIMIZATION_LEVEL",
    )
    assert flags(cmake, "-ffast-math")[0][1] == ALL


def test_cmake_quoted_whole_argument_is_removed_with_its_quotes(cmake: BuildFacts) -> None:
    use = next(f for f in cmake.flags if f.flag == "-O0")
    assert cut(CMAKE, use.removal) == '"-O0" '


def test_cmake_libraries(cmake: BuildFacts) -> None:
    libs = [(lib.name, lib.kind, lib.target) for lib in cmake.libraries]
    assert libs == [
        ("cmsis-nn", LibraryKind.TARGET, "app"),
        ("m", LibraryKind.TARGET, "app"),
        ("cmsisnn", LibraryKind.ARCHIVE, "app"),
        ("foo", LibraryKind.FLAG, "app"),
    ]
    first = at(CMAKE, "cmsis-nn m")
    assert cmake.libraries[0].span == Span(
        first.line, first.column, first.line, first.column + len("cmsis-nn")
    )


def test_cmake_sources_targets_subdirectories(cmake: BuildFacts) -> None:
    sources = [(s.path_text, s.expanded, s.kind, s.target) for s in cmake.sources]
    assert sources == [
        ("generated/*.c", "generated/*.c", SourceKind.GLOB, "app"),
        ("${CMSIS_NN}", "third_party/CMSIS-NN", SourceKind.SUBDIRECTORY, None),
        ("main.c", "main.c", SourceKind.FILE, "app"),
    ]
    assert cmake.sources[0].span == at(CMAKE, "generated/*.c")  # where the glob is written
    assert cmake.sources[1].span == at(CMAKE, "${CMSIS_NN}")
    assert [(t.name, t.kind) for t in cmake.targets] == [("app", "executable")]


def test_cmake_includes_and_definitions(cmake: BuildFacts) -> None:
    dirs = [(i.path_text, i.expanded, i.scope) for i in cmake.include_dirs]
    assert dirs == [
        ("${CMSIS_NN}/Include", "third_party/CMSIS-NN/Include", Scope.of_target("app")),
        ("include", "include", ALL),
    ]
    defs = [(d.name, d.value, d.scope.kind) for d in cmake.definitions]
    assert defs == [
        ("CMSIS_NN_USE_SINGLE_ROUNDING", None, ScopeKind.TARGET),
        ("ARM_MATH_DSP", "1", ScopeKind.TARGET),
        ("FOO", None, ScopeKind.ALL),
    ]
    assert [i.path_text for i in cmake.includes] == ["cmake/toolchain.cmake"]


def test_cmake_statements_point_before_the_closing_paren(cmake: BuildFacts) -> None:
    (link,) = cmake.statements_named("target_link_libraries", "app")
    line = CMAKE.split("\n")[link.span.line]
    assert link.append_at == Span.at(link.span.line, line.rindex(")"))
    assert link.name_span == Span(12, 0, 12, len("target_link_libraries"))


def test_cmake_cmsis_nn_own_default(tmp_path: Path) -> None:
    text = 'set(CMSIS_OPTIMIZATION_LEVEL\n    "-Ofast"\n    CACHE STRING "Compiler optimization level.")\n'
    text += (
        "add_library(cmsis-nn STATIC)\ntarget_compile_options(cmsis-nn PRIVATE ${CMSIS_OPTIMIZATION_LEVEL})\n"
    )
    facts = parse_build_file(tmp_path / "CMakeLists.txt", text)
    assert {(f.span, f.scope) for f in facts.flags} == {(Span(1, 5, 1, 11), Scope.of_target("cmsis-nn"))}


@pytest.mark.parametrize(
    "text",
    [
        'add_compile_options("-O3\n',
        "target_compile_options(app PRIVATE -O3",
        "set(\nset(X [[ never closed\n",
        "#[==[ open comment\n",
        ")))(((\n$<$<:>\n${${${}}}\n",
        "set(A ${A} ${A})\n" * 40 + "add_compile_options(${A})\n",
        "file(GLOB)\nfile(GLOB X)\nset_source_files_properties(PROPERTIES)\nset_property(SOURCE PROPERTY)\n",
    ],
)
def test_cmake_broken_text_never_raises(text: str) -> None:
    assert parse_build_file(ROOT / "CMakeLists.txt", text).kind is BuildKind.CMAKE


# ---------------------------------------------------------------------------------- compile_commands


def test_compile_commands_arguments_and_command() -> None:
    entries = [
        {
            "directory": "/fw/build",
            "file": "/fw/generated/model.c",
            "arguments": [
                "arm-none-eabi-gcc",
                "-O3",
                "-I/fw/CMSIS-NN/Include",
                "-DX=1",
                "-c",
                "/fw/generated/model.c",
                "-o",
                "model.o",
            ],
        },
        {
            "directory": "/fw/build",
            "file": "../CMSIS-NN/Source/a.c",
            "command": "gcc -Ofast -fno-builtin -c ../CMSIS-NN/Source/a.c -o a.o",
        },
    ]
    text = json.dumps(entries, indent=1)
    facts = parse_build_file(ROOT / "build" / "compile_commands.json", text)
    assert facts.kind is BuildKind.COMPILE_COMMANDS
    assert flags(facts, "-O3") == [
        (at(text, "-O3"), Scope.files("../generated/model.c"), "compile_commands.json")
    ]
    assert flags(facts, "-Ofast") == [
        (at(text, "-Ofast"), Scope.files("../CMSIS-NN/Source/a.c"), "compile_commands.json")
    ]
    assert flags(facts, "-fno-builtin")[0][0] == at(text, "-fno-builtin")
    assert [f.flag for f in facts.flags] == ["-O3", "-Ofast", "-fno-builtin"]  # not -c, -o or the file
    assert [(s.expanded, s.span) for s in facts.sources] == [
        ("../generated/model.c", at(text, "/fw/generated/model.c")),
        ("../CMSIS-NN/Source/a.c", at(text, "../CMSIS-NN/Source/a.c")),
    ]
    assert [i.path_text for i in facts.include_dirs] == ["/fw/CMSIS-NN/Include"]
    assert [(d.name, d.value) for d in facts.definitions] == [("X", "1")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{oops", "not valid JSON"),
        ('{"file": "a.c"}', "expected a list"),
        ("", "not valid JSON"),
        ('[1, "x", {"file": 3}, {"file": "a.c", "command": "gcc \'unterminated -O3"}]', None),
    ],
)
def test_compile_commands_broken(text: str, problem: str | None) -> None:
    facts = parse_build_file(ROOT / "compile_commands.json", text)
    if problem is None:
        assert facts.problems == () and [f.flag for f in facts.flags] == ["-O3"]
    else:
        assert problem in facts.problems[0].message


# ---------------------------------------------------------------------------------------- platformio

PLATFORMIO = """\
; PlatformIO project
[platformio]
src_dir = firmware

[env:nucleo]
platform = ststm32
board = nucleo_f746zg
build_flags =
    -O3 ; fast, they said
    -DCMSIS_NN_USE_SINGLE_ROUNDING
    -I lib/CMSIS-NN/Include
build_src_flags = -fno-builtin
lib_deps =
    arm-software/CMSIS-NN @ ^6.0.0, bblanchon/ArduinoJson
build_src_filter = +<*> -<test/> +<model/>
"""


def test_platformio() -> None:
    facts = parse_build_file(ROOT / "platformio.ini", PLATFORMIO)
    assert facts.kind is BuildKind.PLATFORMIO
    assert flags(facts, "-O3") == [(Span(8, 4, 8, 7), ALL, "build_flags")]
    assert flags(facts, "-fno-builtin") == [
        (at(PLATFORMIO, "-fno-builtin"), Scope.files("firmware/**"), "build_src_flags")
    ]
    assert [(d.name, d.span) for d in facts.definitions] == [
        ("CMSIS_NN_USE_SINGLE_ROUNDING", Span(9, 4, 9, 34))
    ]
    assert [i.path_text for i in facts.include_dirs] == ["lib/CMSIS-NN/Include"]
    assert [(lib.name, lib.kind) for lib in facts.libraries] == [
        ("arm-software/CMSIS-NN @ ^6.0.0", LibraryKind.PACKAGE),
        ("bblanchon/ArduinoJson", LibraryKind.PACKAGE),
    ]
    assert [s.expanded for s in facts.sources] == ["firmware/**", "firmware/model/**"]
    assert facts.default_sources == ("firmware/**", "lib/**")
    (build_flags,) = facts.statements_named("build_flags")
    assert build_flags.target == "env:nucleo" and build_flags.append_at == Span.at(10, 27)


def test_platformio_broken() -> None:
    facts = parse_build_file(ROOT / "platformio.ini", "[env\n  = \n\tbuild_flags = -O3\n[x]]\nbuild_flags\n")
    assert facts.flags == ()


# --------------------------------------------------------------------------------------- any text


def test_unknown_binary_and_huge_files() -> None:
    assert (
        parse_build_file(ROOT / "notes.txt", "CFLAGS = -O3")
        .problems[0]
        .message.startswith("not a build file")
    )
    assert "binary" in parse_build_file(ROOT / "Makefile", "CFLAGS\x00-O3").problems[0].message
    huge = parse_build_file(ROOT / "CMakeLists.txt", "#" * (9 * 1024 * 1024))
    assert "larger than" in huge.problems[0].message and huge.flags == ()


@pytest.mark.parametrize("name", ["Makefile", "CMakeLists.txt", "compile_commands.json", "platformio.ini"])
def test_mutated_files_never_raise(name: str) -> None:
    rng = random.Random(6)
    seed = {"Makefile": MAKEFILE, "CMakeLists.txt": CMAKE, "platformio.ini": PLATFORMIO}.get(
        name, '[{"file": "a"}]'
    )
    alphabet = "$(){}[]<>:;=+?!#\\\"'\n\t %*-O3"
    for _ in range(150):
        chars = list(seed)
        for _ in range(rng.randrange(1, 30)):
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(alphabet))
            del chars[rng.randrange(len(chars))]
        parse_build_file(ROOT / name, "".join(chars))  # must not raise


# ------------------------------------------------------------------------------------------- globs


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/CMSIS-NN/**", "CMSIS-NN/Source/a.c", True),
        ("**/CMSIS-NN/**", "third_party/CMSIS-NN/Source/a.c", True),
        ("**/CMSIS-NN/**", "../CMSIS-NN/Source/a.c", True),
        ("generated/**", "generated/model.c", True),
        ("generated/*.c", "generated/sub/model.c", False),
        ("generated/**.c", "generated/sub/model.c", True),
        ("./src/[!x]*.c", "src/main.c", True),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern, path) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("CMSIS-NN/**.o", "CMSIS-NN/Source/Conv/arm_convolve_s8.c", True),
        ("build/CMSIS-NN/**.o", "CMSIS-NN/Source/arm_convolve_s8.c", True),
        ("$(BUILD)/**.o", "generated/model.c", True),
        ("kernels.o", "kernels.c", True),
        ("kernels.o", "src/kernels.c", False),
        ("src/**.o", "CMSIS-NN/x.c", False),
    ],
)
def test_object_patterns_reach_their_sources(pattern: str, path: str, expected: bool) -> None:
    assert pattern_covers(pattern, path) is expected


def test_cmsis_nn_folders_by_name() -> None:
    assert in_cmsis_nn("third_party/cmsis_nn-6.0.0/Source/a.c") and in_cmsis_nn("CMSIS/NN/Include")
    assert in_cmsis_nn("$(CMSIS_NN)/Include") and in_cmsis_nn("$(CMSIS_PATH)/NN/Source/x.c")
    assert not in_cmsis_nn("src/cmsis_nn_wrapper.c") and not in_cmsis_nn("cmsis-nn-app/main.c")
