"""Names from a model never become code: every string a template prints is filtered or refused.

A node named `x */ int injected = 1; /*` once put code into model_data.c, which `verify --target host`
compiles and runs. These tests pin the filters' exact output, compile what they produce with the real
compiler in its strictest mode (trigraphs on), and generate a whole model whose every node, tensor,
input, output and graph name is hostile.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantcore import limits
from quantcore.display import printable, shorten
from quantcore.templating import PLAIN, TemplateValueError, c_comment, c_string, render
from tests import needs
from tests.onnx_models import small_cnn

MARKER = "FIXPOINT_INJECTED"
HOSTILE = (
    f"x */ int {MARKER}_a = 1; /* y",
    f"a\nint {MARKER}_b = 2;\n",
    f'q" ; int {MARKER}_c = 3; char *s = "',
    f"back\\slash\\\nint {MARKER}_d = 4;",
    f"#define {MARKER}_e 5",
    f"tri ??/\nint {MARKER}_f = 6; ??/",
    f"// {MARKER}_g\r\n",
    f"n\u00e4me \u2603 \U0001f600 {MARKER}_h",
    f"{'w' * 10_000}{MARKER}_i",
)
EXAMPLES = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES", "60"))
CC = shutil.which("gcc")


def test_c_comment_cannot_end_or_open_a_comment_nor_splice_a_line() -> None:
    assert c_comment("conv1/Conv_0") == "conv1/Conv_0"
    assert c_comment("x */ y /* z") == "x * / y / * z"
    assert c_comment("*/*/") == "* / * /"
    assert c_comment("a\nb\\") == "a<U+000A>b<U+005C>"
    assert c_comment("??/??=") == "? ?/? ?="
    assert c_comment("\u00e9") == "<U+00E9>"


def test_c_string_is_one_printable_line_with_quotes_and_trigraphs_escaped() -> None:
    assert c_string("conv1") == '"conv1"'
    assert c_string('a"b') == '"a\\"b"'
    assert c_string("??/") == '"\\?\\?/"'
    assert c_string("line\nbreak\\") == '"line<U+000A>break<U+005C>"'


def test_long_names_are_cut_in_the_middle_to_the_limit() -> None:
    name = "a" * 5000 + "MIDDLE" + "z" * 5000
    short = shorten(name)
    assert len(short) == limits.NAME_MAX_CHARS
    assert short.startswith("aaa") and short.endswith("zzz") and "..." in short
    assert c_comment(name) == short


def test_a_template_that_prints_an_unfiltered_name_fails_to_render() -> None:
    context = dict(flash_origin=0, flash_size=1024, ram_origin=0x2000_0000, ram_size=4096, stack_size=512)
    assert "Linker script for qemu-m4" in render("target/link.ld.j2", **context, target="qemu-m4")
    with pytest.raises(TemplateValueError, match=r"printed 'board \*/ evil' without c_comment"):
        render("target/link.ld.j2", **context, target="board */ evil")


@pytest.mark.parametrize("text", ["a b", "conv_1.weight", "[1x2x3]", "-1, 2", "cortex-m4", "-DX=1"])
def test_plain_text_is_identifiers_numbers_shapes_and_flags(text: str) -> None:
    assert PLAIN.match(text)


@pytest.mark.parametrize("text", ["a/b", "a*b", 'a"b', "a\\b", "a?b", "#x", "a;b", "f()", "a\nb", "\u00e9"])
def test_plain_text_excludes_whatever_can_leave_a_c_context(text: str) -> None:
    assert not PLAIN.match(text)


@needs.tool("gcc")
@settings(max_examples=max(1, EXAMPLES // 20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(min_size=0, max_size=40), min_size=20, max_size=20))
def test_the_compiler_sees_filtered_names_only_as_comments_and_strings(names: list[str]) -> None:
    """gcc in strict C99 (trigraphs on) compiles every filtered name as comment + literal, and the
    program prints exactly the printable forms: nothing of a name became code."""
    lines = ["#include <stdio.h>", "int main(void) {"]
    for name in names:
        lines += [f"    /* {c_comment(name)} */", f"    // {c_comment(name)}", f"    puts({c_string(name)});"]
    lines += ["    return 0;", "}"]
    out = _compile_and_run("\n".join(lines) + "\n")
    assert out == [printable(shorten(name)) for name in names]


def _compile_and_run(source: str) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        src, exe = Path(folder) / "names.c", Path(folder) / "names"
        src.write_text(source)
        assert CC is not None
        flags = ["-std=c99", "-trigraphs", "-pedantic-errors", "-Wall", "-Werror", "-Wno-comment"]
        subprocess.run([CC, *flags, str(src), "-o", str(exe)], check=True, capture_output=True, timeout=60)
        done = subprocess.run([str(exe)], check=True, capture_output=True, timeout=30)
    return done.stdout.decode("ascii").split("\n")[:-1]


# -- a whole model with hostile names -----------------------------------------------------------------


def _hostile_model(folder: Path) -> Path:
    """small_cnn with every node, value and graph name replaced by a hostile one (each still unique)."""
    model = small_cnn(batch=1)
    graph = model.graph
    values = {v for n in graph.node for v in (*n.input, *n.output)} | {i.name for i in graph.initializer}
    renamed = {name: f"{HOSTILE[i % len(HOSTILE)]}#{i}" for i, name in enumerate(sorted(values))}
    for i, node in enumerate(graph.node):
        node.name = f"{HOSTILE[(i + 3) % len(HOSTILE)]}@{i}"
        node.input[:] = [renamed.get(v, v) for v in node.input]
        node.output[:] = [renamed.get(v, v) for v in node.output]
    for tensor in (*graph.initializer, *graph.input, *graph.output):
        tensor.name = renamed.get(tensor.name, tensor.name)
    graph.name = HOSTILE[0]
    onnx.checker.check_model(model)
    path = folder / "hostile.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def hostile_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from quantcore import pipeline
    from quantcore.codegen.generate import Sources, generate
    from quantcore.data import DataSet
    from quantcore.quantize import params_json
    from quantcore.quantize.document import from_document

    folder = tmp_path_factory.mktemp("hostile")
    model_path = _hostile_model(folder)
    loaded = pipeline.load_model(model_path)
    x = np.random.default_rng(0).normal(size=(8, 1, 16, 16)).astype(np.float32)
    document = pipeline.quantize(loaded, DataSet(x)).document
    params = folder / "hostile.params.json"
    params_json.write(params, document)
    out = folder / "model"
    generate(from_document(loaded.graph, document), out, sources=Sources(params, model_path))
    return out


def test_hostile_names_are_shown_but_never_reach_code(hostile_sources: Path) -> None:
    texts = {p.name: p.read_text() for p in sorted(hostile_sources.iterdir())}
    assert set(texts) == {"model.h", "model.c", "model_data.c"}
    assert all(text.isascii() for text in texts.values())
    assert f"x * / int {MARKER}_a = 1; / * y" in texts["model.c"]  # shown, defused
    for name, text in texts.items():
        # Symbols are made from names (c_identifier keeps [A-Za-z0-9_]), so the marker may sit inside one;
        # as a token of its own it would be code the name brought in.
        assert not re.search(rf"(?<![A-Za-z0-9_]){MARKER}", _code_only(text)), f"{name}: a name reached code"
        assert max(len(token) for token in re.findall(r"\w+", _code_only(text))) <= 80
        assert not re.search(rf"^[ \t]*#.*{MARKER}", text, re.MULTILINE), f"{name}: a name became a directive"


@needs.tool("gcc")
def test_hostile_names_compile_in_strict_iso_c_with_trigraphs(hostile_sources: Path) -> None:
    from quantcore.targets import cmsis_nn

    try:
        include = cmsis_nn.locate(None).path / "Include"
    except cmsis_nn.CmsisNnNotFound as exc:
        needs.absent(f"needs CMSIS-NN's headers: {exc}")
    assert CC is not None
    for source in ("model.c", "model_data.c"):
        subprocess.run(
            [CC, "-std=c11", "-trigraphs", "-fsyntax-only", "-Wall", "-Werror", "-Wno-comment",
             f"-I{include}", f"-I{hostile_sources}", str(hostile_sources / source)],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip


def _code_only(text: str) -> str:
    """C text with comments and string/char literals removed (what the compiler treats as code)."""
    pattern = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.DOTALL)
    return pattern.sub(" ", text)
