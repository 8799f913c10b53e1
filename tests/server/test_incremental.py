"""The incremental checker (rules/incremental.py) against a from-scratch run, on real files.

A generated firmware tree (a real model, its quant-params JSON, the sources `fixpoint generate` wrote,
a hand-written source with kernel calls, a Makefile, fixpoint.toml) is edited by a random sequence of
steps - an editor's buffer changes, a file written or deleted on disk (reported as the watcher
reports it), fixpoint.toml changed and the project reloaded - and after each step the server's
incremental findings must equal run_rules over a new index of the same disk and open buffers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixpoint_server import settings
from fixpoint_server.checker import Checker
from fixpoint_server.findings import Finding
from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.rules import run_rules
from fixpoint_server.rules.context import FactsCache, FileKind
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import fuzz
from tests.server.fixtures import GeneratedProject, copy_project, generated_project

NET = "src/net.c"
SHAPES = "src/shapes.h"
_STAMP = iter(range(1, 1 << 62))


def net_source(count: int, aligned: bool, call: bool, sized: bool, bias_type: str) -> str:
    """A hand-written source: a weights array (its size and alignment vary), a bias, maybe a kernel
    call taking both, maybe a sizeof of the weights."""
    attribute = " __attribute__((aligned(16)))" if aligned else ""
    values = ", ".join(str(i % 7) for i in range(count))
    lines = [
        '#include "arm_nnfunctions.h"',
        '#include "shapes.h"',
        f"static const int8_t conv1_weights[{count}]{attribute} = {{{values}}};",
        f"static const {bias_type} conv1_bias[NET_CH] = {{1, 2, 3, 4}};",
        "static int8_t scratch_buffer[NET_SCRATCH];",
        "void run(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *p,",
        "         const cmsis_nn_per_channel_quant_params *q, const cmsis_nn_dims *d, const int8_t *in,",
        "         int8_t *out)",
        "{",
    ]
    if call:
        lines.append("    arm_convolve_s8(ctx, p, q, d, in, d, conv1_weights, d, conv1_bias, d, d, out);")
    if sized:
        lines.append("    (void)sizeof(conv1_weights);")
    lines += ["}", ""]
    return "\n".join(lines)


def shapes_header(channels: int, scratch: int) -> str:
    return f"#define NET_CH {channels}\n#define NET_SCRATCH {scratch}\n"


def makefile(flag: str) -> str:
    return f"CFLAGS += {flag}\nSRCS := src/net.c generated/model.c\nall:\n\t$(CC) $(CFLAGS) $(SRCS)\n"


def toml(alignment: int) -> str:
    files = 'generated = "generated"\nmodel = "residual.onnx"\nparams = "residual.params.json"\n'
    return f"{files}alignment = {alignment}\n"


nets = st.builds(
    net_source,
    st.sampled_from([16, 24, 32, 36]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["int32_t", "int8_t"]),
)
texts = {
    NET: nets,
    SHAPES: st.builds(shapes_header, st.sampled_from([3, 4]), st.sampled_from([64, 66])),
    "Makefile": st.sampled_from(["-O2", "-O3", "-Ofast", "-O2 -mcpu=cortex-m0", "-O3 -mcpu=cortex-m55"]).map(
        makefile
    ),
    "generated/model_data.c": st.sampled_from(["", "/* tuned */\n", "int8_t model_extra_bias[3];\n"]),
    "generated/model.c": st.sampled_from(["", "/* edited */\n"]),
    "residual.params.json": st.sampled_from(["ok", "zero point 128", "broken"]),
    "fixpoint.toml": st.sampled_from([8, 16, 32]).map(toml),
}
steps = st.lists(
    st.tuples(
        st.sampled_from(sorted(texts)),
        st.sampled_from(["editor", "disk", "delete", "close"]),
        st.data(),
    ),
    min_size=1,
    max_size=8,
)


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> GeneratedProject:
    return generated_project(tmp_path_factory.mktemp("incremental"))


class Tree:
    """The tree, the server's index and checker over it, and the texts the editor has open."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.originals = {
            name: (root / name).read_text() for name in texts if (root / name).is_file()
        }  # fmt: skip
        self.write("fixpoint.toml", toml(16))
        self.write(NET, net_source(24, False, True, False, "int32_t"))
        self.write(SHAPES, shapes_header(4, 64))
        self.write("Makefile", makefile("-O3"))
        self.index = WorkspaceIndex(self.root)
        self.index.watching = True  # the tests report every change on disk, as the watcher does
        self.reload()
        self.checker = Checker(self.index, lambda grouped: None, lambda: [])
        self.version = 1

    def write(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        stamp = next(_STAMP) * 1_000_000_000
        os.utime(path, ns=(stamp, stamp))  # a distinct mtime per write: versions are mtime and size

    def reload(self) -> None:
        """What the server does when fixpoint.toml changes (FixpointServer.reload_project)."""
        self.index.project = settings.load(self.root)[0]
        self.index.scan()
        ctx = self.index.context()
        self.index.project = settings.discover(
            self.root, self.index.project, ctx.files_of(FileKind.PARAMS_JSON), ctx.c_files(), self.index.read
        )

    def content(self, name: str, data: st.DataObject) -> str:
        drawn = data.draw(texts[name])
        if name == "residual.params.json":
            document = json.loads(self.originals[name])
            if drawn == "broken":
                return self.originals[name][:200]
            if drawn == "zero point 128":
                tensor = next(iter(document["tensors"].values()))
                tensor["zero_point"] = 128
            return json.dumps(document, indent=2)
        if name.startswith("generated/"):
            return self.originals[name] + drawn
        return str(drawn)

    def step(self, name: str, how: str, data: st.DataObject) -> None:
        path = self.root / name
        if how == "editor":
            self.version += 1
            self.index.opened(path, self.version, self.content(name, data))
        elif how == "close":
            self.index.closed(path)
        elif how == "delete":
            path.unlink(missing_ok=True)
            self.index.deleted(path)
        else:
            self.write(name, self.content(name, data))
            self.index.changed_on_disk(path)
        if name == "fixpoint.toml" and how != "editor":
            self.reload()

    def from_scratch(self) -> list[Finding]:
        fresh = WorkspaceIndex(self.root, self.index.project)
        # parsed facts (by version) and the quantized model are not under test: reused, nothing else
        fresh.cache = FactsCache(entries=dict(self.index.cache.entries))
        fresh.scan()
        for path, (version, text) in self.index.open_docs.items():
            fresh.opened(path, version, text)
        return run_rules(fresh.context())


@fuzz(8)
@given(steps=steps)
def test_incremental_findings_equal_a_from_scratch_run_after_every_edit(
    golden: GeneratedProject,
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, str, st.DataObject]],
) -> None:
    tree = Tree(copy_project(golden, tmp_path_factory.mktemp("tree")).root)
    assert tree.checker.check_rules() == tree.from_scratch()
    for name, how, data in steps:
        tree.step(name, how, data)
        assert tree.checker.check_rules() == tree.from_scratch(), (name, how)


def test_a_c_edit_reruns_that_file_only(golden: GeneratedProject, tmp_path: Path) -> None:
    """The keystroke case: one C file edited; the rules that do not read C are not run, the split C
    rules run their part for that one file."""
    tree = Tree(copy_project(golden, tmp_path).root)
    first = tree.checker.check_rules()
    assert tree.checker.check_rules() == first
    engine = tree.checker._engine
    assert engine is not None and engine.reran == {
        "fixpoint_server.rules.misaligned_array": 0,
        "fixpoint_server.rules.stale_generated": 0,
        "fixpoint_server.rules.skipped_file": 0,
    }
    tree.index.opened(tree.root / NET, 2, net_source(24, True, True, False, "int8_t"))
    after = tree.checker.check_rules()
    assert after == tree.from_scratch()
    new = next(f for f in after if f not in first)
    assert new.message.startswith("bias conv1_bias is an array of int8_t")
    assert engine.reran["fixpoint_server.rules.misaligned_array"] == 1
    assert engine.reran["fixpoint_server.rules.skipped_file"] == 1
    assert "fixpoint_server.rules.params_json" not in engine.reran
    assert "fixpoint_server.rules.kernel_opt_level" not in engine.reran
