"""Property tests (hypothesis) of what the server reads from a firmware tree: the C scanner, the build-file
readers (Makefile, CMake, compile_commands.json, platformio.ini) and the rules over them.

Each reader promises to take any text - unbalanced braces, unterminated comments, binary junk - and
give fewer facts, never an exception. The build-file readers and the rule runner have a last-resort
catch that turns a bug into a "could not read past a construct" problem or an "internal error in the X
checker" finding; these tests assert that it never fires, so a reader bug found here is a failure, not
a quiet loss of facts. Texts are drawn from the tokens the readers look for, glued at random, and from
arbitrary Unicode.

FIXPOINT_FUZZ_EXAMPLES (an integer) sets the examples per property for a longer fuzzing run.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from fixpoint_server.findings import Severity
from fixpoint_server.parse.build_files import parse_build_file
from fixpoint_server.parse.c_source import CWorkspace, evaluate, referenced_name, scan_c, split_arguments
from fixpoint_server.rules import run_rules
from fixpoint_server.rules.context import FactsCache
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server import fixtures

EXAMPLES = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES") or 60)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

C_TOKENS = (
    "static", "const", "extern", "int8_t", "int32_t", "q7_t", "uint8_t", "int16_t", "conv1_weights",
    "conv1_bias", "arena", "[", "]", "{", "}", "(", ")", ";", ",", "=", "*", "&", "16", "0x7f", "-128",
    "1 << 40", "/ 0", "sizeof(int32_t)", "(int8_t)", "__attribute__((aligned(16)))", "__ALIGNED(4)",
    "alignas(8)", "#define N 32\n", "#define N (N + 1)\n", "#define F(x) x\n", "#if 0\n", "#if 1\n",
    "#else\n", "#endif\n", '#include "model.h"\n', "#pragma pack(1)\n", "/*", "*/", "//", '"', "'", "\\",
    "\n", " ", "arm_convolve_s8", "arm_fully_connected_s8", "cmsis_nn_conv_params", ".input_offset",
    ".output_offset", "->", "...", "\x00", "\u00e9", "\U0001f600", "??/", 'R"(', "\r", "\t", "N",
    "/* fixpoint: generated */", "params.json sha256 ", "l3_conv2_params", "model_l0_conv_bias",
)  # fmt: skip
MAKE_TOKENS = (
    "CFLAGS", "+=", ":=", "=", "?=", "-O3", "-Ofast", "-DCMSIS_NN_USE_SINGLE_ROUNDING", "-I",
    "CMSIS-NN/Include",
    "$(", "${", ")", "}", "$(wildcard src/*.c)", "$(shell find . -name '*.c')", "$(addprefix a/,b)",
    "$(VAR)", "VAR", "\n", "\t", " ", ":", "%.o: %.c", "ifeq (a,b)", "else", "endif", "include x.mk",
    "define X", "endef", "\\\n", "#", "-lcmsis-nn", "-L", "lib", "src/model/model.c", "$$", "$(", "%",
)  # fmt: skip
CMAKE_TOKENS = (
    "add_executable(", "add_library(", "target_compile_options(", "target_link_libraries(", "set(",
    "include_directories(", "add_subdirectory(", "${", "}", "(", ")", '"', "\\", "[[", "]]", "[=[", "]=]",
    "#", "\n", " ", "PRIVATE", "PUBLIC", "-O3", "CMSISNN", "cmsis-nn", "src/model/model.c", "VAR", "${VAR}",
    "set_source_files_properties(", "COMPILE_OPTIONS", "CMSIS_NN_USE_SINGLE_ROUNDING", "if(", "endif()",
    "foreach(", "endforeach()", "macro(", "endmacro()", ";",
)  # fmt: skip
INI_TOKENS = (
    "[env:m4]", "[env]", "[platformio]", "build_flags", "build_src_filter", "lib_deps", "=", "\n", " ",
    "-O3", "-I", "+<*>", "-<x/>", "${env.build_flags}", ";", "#", "  -Ofast\n", "extends = env", "%",
)  # fmt: skip


def glued(tokens: tuple[str, ...], size: int = 80) -> st.SearchStrategy[str]:
    """Texts made of `tokens` in any order, or any Unicode at all."""
    return st.one_of(st.lists(st.sampled_from(tokens), max_size=size).map("".join), st.text(max_size=300))


def json_values() -> st.SearchStrategy[object]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
        st.sampled_from(["-O3", "main.c", "gcc -O3 -c main.c", "/abs/x.c", "-I", "-o", "-c"]),
    )  # fmt: skip
    keyed = st.sampled_from(["file", "directory", "command", "arguments", "output", "x"])
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keyed, inner, max_size=5)
    )


@FUZZ
@given(glued(C_TOKENS))
def test_the_c_scanner_reads_any_text(text: str) -> None:
    cfile = scan_c(text)
    lines = text.count("\n")
    workspace = CWorkspace({Path("fuzz.c"): cfile})
    for array in cfile.arrays:
        assert 0 <= array.name_span.line <= array.name_span.end_line <= lines
        cfile.values(array)
        workspace.count(Path("fuzz.c"), array)
        workspace.alignment(Path("fuzz.c"), array)
    for call in cfile.calls:
        assert 0 <= call.span.line <= lines
        for argument in call.args:
            referenced_name(argument.text)
            cfile.evaluate(argument.text)


@FUZZ
@given(glued(C_TOKENS, 40))
def test_c_expressions_are_a_value_or_none(text: str) -> None:
    value = evaluate(text)
    assert value is None or isinstance(value, int)
    if "(" in text:
        arguments, end = split_arguments(text, text.index("("))
        assert all(0 <= a <= b <= len(text) for a, b in arguments) and end <= len(text)


@FUZZ
@given(st.sampled_from(["Makefile", "src/rules.mk"]), glued(MAKE_TOKENS))
def test_makefiles_of_any_text_are_read_without_a_reader_bug(name: str, text: str) -> None:
    assert_read(name, text)


@FUZZ
@given(st.sampled_from(["CMakeLists.txt", "cmake/cmsis.cmake"]), glued(CMAKE_TOKENS))
def test_cmake_files_of_any_text_are_read_without_a_reader_bug(name: str, text: str) -> None:
    assert_read(name, text)


@FUZZ
@given(glued(INI_TOKENS))
def test_platformio_ini_of_any_text_is_read_without_a_reader_bug(text: str) -> None:
    assert_read("platformio.ini", text)


@FUZZ
@given(st.one_of(json_values().map(json.dumps), st.text(max_size=200)))
def test_compile_commands_of_any_json_are_read_without_a_reader_bug(text: str) -> None:
    assert_read("compile_commands.json", text)


def assert_read(name: str, text: str) -> None:
    facts = parse_build_file(Path("/fw") / name, text)
    bugs = [p.message for p in facts.problems if "could not read past a construct" in p.message]
    assert bugs == [], bugs
    lines = text.count("\n") + text.count("\r")
    for fact in (*facts.flags, *facts.definitions, *facts.include_dirs, *facts.sources):
        assert 0 <= fact.span.line <= fact.span.end_line <= lines


@cache
def _project() -> fixtures.GeneratedProject:
    import tempfile

    return fixtures.generated_project(Path(tempfile.mkdtemp(prefix="fixpoint-fuzz-")) / "fw")


@FUZZ
@given(glued(C_TOKENS), glued(MAKE_TOKENS, 30))
def test_every_rule_survives_any_c_source_and_makefile(source: str, makefile: str) -> None:
    project = _project()
    texts = {project.root / "src" / "net.c": source, project.root / "Makefile": makefile}
    ctx = fixtures.context(project.root, project.project, texts, _CACHE)
    crashed = [f.message for f in run_rules(ctx) if "internal error in the" in f.message]
    assert crashed == []
    assert all(f.effective_severity in Severity for f in run_rules(ctx))


_CACHE = FactsCache()
"""Shared across examples: the residual model is quantized once, as the server's cache would keep it."""
