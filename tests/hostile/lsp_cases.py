"""Cases of the class "lsp": the language server over stdio against hostile trees and hostile requests.

Every scenario runs initialize/initialized, its actions, then shutdown/exit (lsp_client.py); pass means
every request answered (a result or an error) in time, no traceback, exit status 0 and nothing written
outside the workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hostile import kit
from tests.hostile.lsp_client import Notify, Raw, Request, Scenario, Sleep
from tests.hostile.runner import Case, Plan
from tests.hostile.workspace import Workspace

CHECK = "fixpoint.checkWorkspace"
REGENERATE = "fixpoint.regenerateModel"
BIG = 2**31 - 1
"""The largest LSP uinteger: line and character numbers from a hostile client."""


def command(name: str, *arguments: Any) -> Request:
    return Request("workspace/executeCommand", {"command": name, "arguments": list(arguments)})


def hover(path: Path, line: int, character: int) -> Request:
    return Request(
        "textDocument/hover",
        {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character}},
    )


def did_open(path: Path, text: str, language: str = "c") -> Notify:
    return Notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": path.as_uri(), "languageId": language, "version": 1, "text": text}},
    )


def _tree(w: Workspace) -> None:
    w.copy_all("tree")


def _scenario(build: Callable[[Workspace], Scenario], tree: bool = True) -> Callable[[Workspace], Plan]:
    def setup(w: Workspace) -> Plan:
        if tree:
            _tree(w)
        return Plan(lsp=build(w))

    return setup


def _check_after(change: Callable[[Workspace], object]) -> Callable[[Workspace], Scenario]:
    def build(w: Workspace) -> Scenario:
        change(w)
        return Scenario([command(CHECK)])

    return build


def _untrusted(kind: str) -> Callable[[Workspace], Scenario]:
    def build(w: Workspace) -> Scenario:
        kit.tree_model(w, kind)
        return Scenario([command(CHECK)], init_options={"trusted": False})

    return build


def _hovers(positions: list[tuple[int, int]]) -> Callable[[Workspace], Scenario]:
    def build(w: Workspace) -> Scenario:
        source = w.path("src/model/model.c")
        return Scenario([did_open(source, source.read_text()), *(hover(source, *p) for p in positions)])

    return build


def _reversed_range(w: Workspace) -> Scenario:
    source = w.path("src/model/model.c")
    rng = {"start": {"line": 40, "character": 5}, "end": {"line": 2, "character": 0}}
    params = {"textDocument": {"uri": source.as_uri()}, "range": rng, "context": {"diagnostics": []}}
    return Scenario([did_open(source, source.read_text()), Request("textDocument/codeAction", params)])


def _hostile_open(w: Workspace) -> Scenario:
    name = 'evil\n#error FXPWN_LSP "q" \\\x1b[31m\u202e.c'  # no "/": one file name
    path = w.write(f"src/{name}", "int evil;\n")
    return Scenario([did_open(path, "int evil;\n"), hover(path, 0, 4), command(CHECK)])


def _regenerate_escape(w: Workspace) -> Scenario:
    toml = w.path("fixpoint.toml")
    toml.write_text(toml.read_text().replace('generated = "src/model"', 'generated = "../escape"'))
    return Scenario([command(REGENERATE)])


def _regenerate_option_outside(w: Workspace) -> Scenario:
    return Scenario(
        [command(REGENERATE, {"output": "../escape"}), command(REGENERATE, {"output": str(w.outside)})]
    )


def _malformed(w: Workspace) -> Scenario:
    source = w.path("src/main.c")
    return Scenario(
        [
            Request("textDocument/hover", {"position": {"line": 0}}),
            Request("textDocument/hover", None),
            Request(
                "textDocument/codeAction", {"textDocument": {"uri": source.as_uri()}, "range": "everything"}
            ),
            Request("workspace/executeCommand", {"command": 42, "arguments": "not a list"}),
            Request(
                "textDocument/hover",
                {"textDocument": {"uri": "file:///%00/\x00"}, "position": {"line": 0, "character": 0}},
            ),
            Request("fixpoint/noSuchMethod", {}),
            command(CHECK),
        ]
    )


def frame(body: bytes) -> bytes:
    """`body` as one LSP frame (right Content-Length, whatever the body holds)."""
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _broken_frames(w: Workspace) -> Scenario:
    return Scenario(
        [
            Raw(frame(b"{not json}")),
            Raw(frame(b'{"jsonrpc": "2.0", "id": "x"}')),
            Raw(frame(b'{"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": [1, 2]}')),
            Sleep(0.5),
            command(CHECK),
        ]
    )


def _toml_bad_values(w: Workspace) -> Scenario:
    w.write("fixpoint.toml", kit.BAD_TOML)
    return Scenario([command(CHECK), command(REGENERATE)])


def _quantize_outside(w: Workspace) -> Scenario:
    return Scenario(
        [
            command("fixpoint.quantize", {"model": "/etc/passwd", "data": "x.npz", "output": "o.json"}),
            command(
                "fixpoint.quantize",
                {"model": "model/tiny.onnx", "data": "../outside", "output": "../outside/o.json"},
            ),
        ]
    )


def _hover_special(target: str) -> Callable[[Workspace], Scenario]:
    def build(w: Workspace) -> Scenario:
        path = w.path("src/special.c")
        if target == "fifo":
            kit.fifo(w, "src/special.c")
        else:
            kit.symlink(w, "src/special.c", target)
        return Scenario([hover(path, 0, 0), command(CHECK)])

    return build


def _change_out_of_range(w: Workspace) -> Scenario:
    source = w.path("src/main.c")
    change = {
        "textDocument": {"uri": source.as_uri(), "version": 2},
        "contentChanges": [
            {
                "range": {"start": {"line": 900, "character": 0}, "end": {"line": 901, "character": 0}},
                "text": "int x;\n",
            }
        ],
    }
    return Scenario(
        [did_open(source, source.read_text()), Notify("textDocument/didChange", change), hover(source, 0, 0)]
    )


def _checks_at_once(w: Workspace) -> Scenario:
    return Scenario([command(CHECK), command(CHECK)])


def lsp_cases() -> list[Case]:
    def case(name: str, build: Callable[[Workspace], Scenario], about: str) -> Case:
        return Case(f"lsp/{name}", "lsp", _scenario(build), about)

    return [
        case(
            "initialize-nested-1500",
            _check_after(lambda w: kit.nested_dirs(w, "src/deep", 1500)),
            "initialize on a tree with 1,500 nested folders",
        ),
        case(
            "fifo-source-check-workspace",
            _check_after(lambda w: kit.fifo(w, "src/pipe.c")),
            "a FIFO src/pipe.c, then checkWorkspace",
        ),
        case(
            "devzero-source-check-workspace",
            _check_after(lambda w: kit.symlink(w, "src/zero.c", "/dev/zero")),
            "src/zero.c -> /dev/zero, then checkWorkspace",
        ),
        case(
            "devzero-params-check-workspace",
            _check_after(lambda w: kit.symlink(w, "model/zero.params.json", "/dev/zero")),
            "a params JSON -> /dev/zero",
        ),
        case(
            "loop-1e12-params",
            _check_after(lambda w: kit.tree_model(w, "loop")),
            "the params JSON names a model with a constant Loop of 10^12 iterations",
        ),
        case(
            "loop-1e12-params-untrusted",
            _untrusted("loop"),
            "the same, initializationOptions {trusted: false}",
        ),
        case(
            "constant-of-shape-params",
            _check_after(lambda w: kit.tree_model(w, "huge")),
            "the params JSON names a model with ConstantOfShape 1x1x40000x40000",
        ),
        case("constant-of-shape-params-untrusted", _untrusted("huge"), "the same, untrusted"),
        case(
            "huge-source",
            _check_after(lambda w: w.write("src/huge.c", "int x;\n" * 11_000_000)),
            "a 77 MB C source",
        ),
        case(
            "deep-json",
            _check_after(lambda w: w.write("model/deep.params.json", kit.deep_json())),
            "a params JSON of 200,000 nested arrays",
        ),
        case("hover-line-minus-1", _hovers([(-1, 0), (0, -1)]), "hover at line -1 and at character -1"),
        case("hover-huge-position", _hovers([(BIG, BIG), (3, BIG)]), "hover at line and character 2^31-1"),
        case("hover-beyond-uinteger", _hovers([(2**40, 2**40)]), "hover at line 2^40 (not an LSP uinteger)"),
        case("code-action-reversed-range", _reversed_range, "a code action over a reversed range"),
        case(
            "did-open-hostile-name", _hostile_open, "didOpen of a file named with a newline, */, ESC and RLO"
        ),
        case(
            "regenerate-generated-escape",
            _regenerate_escape,
            "fixpoint.toml generated = '../escape', regenerateModel",
        ),
        case(
            "regenerate-output-outside", _regenerate_option_outside, "regenerateModel with an output outside"
        ),
        case(
            "quantize-paths-outside", _quantize_outside, "fixpoint.quantize with paths outside the workspace"
        ),
        case(
            "unknown-command",
            lambda w: Scenario([command("fixpoint.noSuchCommand", 1, 2)]),
            "an unknown command",
        ),
        case("malformed-params", _malformed, "requests with missing or mistyped params, an unknown method"),
        case("broken-frames", _broken_frames, "a frame of invalid JSON and a message without method"),
        case("toml-many-bad-values", _toml_bad_values, "fixpoint.toml with nine bad values"),
        case("hover-on-fifo", _hover_special("fifo"), "hover on a FIFO that is not open in the editor"),
        case("hover-on-devzero", _hover_special("/dev/zero"), "hover on a symlink to /dev/zero not open"),
        case(
            "did-change-out-of-range", _change_out_of_range, "an incremental change past the document's end"
        ),
        case("commands-right-after-start", _checks_at_once, "two checkWorkspace in a row at once"),
    ]
