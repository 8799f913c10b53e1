"""The recurrent kernels through the language server over stdio (pytest-lsp's real client), on the C
`fixpoint generate` writes for TFLM's mnist_lstm model: hovers show the LSTM's arguments, its structs'
fields and the layer's parameters with what each is; the generated files publish no diagnostic, and a
seeded mistake in the open buffer (the hidden state's zero point written as uint8's 128) is one
wrong-zero-point diagnostic on its value (beside stale-generated's note that the file was hand-edited).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.test_lsp import check_workspace, open_doc, wait_for
from tests.server.test_recurrent_rules import _generated


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _generated(tmp_path / "fw", "trained_lstm_int8", "qemu-m4")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "fixpoint_server", "--stdio"])
)
async def client(lsp_client: LanguageClient, tree: Path) -> AsyncIterator[LanguageClient]:
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=tree.as_uri(),
                             workspace_folders=[lsp.WorkspaceFolder(uri=tree.as_uri(), name="fw")])
    )  # fmt: skip
    yield lsp_client
    await lsp_client.shutdown_session()


async def _hover(client: LanguageClient, uri: str, text: str, needle: str, after: str = "") -> str:
    lines = text.split("\n")
    line = next(n for n, row in enumerate(lines) if needle in row and after in row)
    column = lines[line].index(needle) + 2
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=line, character=column)
    ))  # fmt: skip
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    return hover.contents.value


async def test_hovers_show_the_lstms_parameters(client: LanguageClient, tree: Path) -> None:
    model_c = tree / "src" / "model" / "model.c"
    text = model_c.read_text()
    uri = open_doc(client, model_c, "c", text)
    kernel = await _hover(client, uri, text, "arm_lstm_unidirectional_s8", "return")
    assert kernel.startswith(
        "**arm_lstm_unidirectional_s8** - int8 input and output, int16 gates and cell state, int32 effective"
        " biases\n\n| argument | what it is |\n|---|---|\n"
    )
    assert (
        "| `buffers` | `cmsis_nn_lstm_context`: two work buffers and the state kept between calls |" in kernel
    )
    context = await _hover(client, uri, text, "cmsis_nn_lstm_context")
    assert "| `cell_state` | int16 cell state, batch_size x hidden_size, kept from call to call |" in context
    layer = await _hover(client, uri, text, "l0_tfl_unidirectional_sequence_lstm_params", "static")
    assert layer.startswith("**tfl\\.unidirectional\\_sequence\\_lstm** - lstm, `arm_lstm_unidirectional_s8`")
    assert "| cell_scale_power | -12 | log2 of the cell state's scale:" in layer
    assert "| output_offset | 0 | the hidden state's zero point, added to every value written;" in layer
    assert "| forget | 2042355287, -3 | 1590606064, -2 |" in layer


async def test_a_seeded_hidden_zero_point_is_one_diagnostic(client: LanguageClient, tree: Path) -> None:
    await check_workspace(client)
    assert {uri: d for uri, d in client.diagnostics.items() if d} == {}
    model_c = tree / "src" / "model" / "model.c"
    text = model_c.read_text()
    start = text.index("l0_tfl_unidirectional_sequence_lstm_params = {")
    at = text.index(".output_offset = 0,", start) + len(".output_offset = ")
    seeded = text[:at] + "128" + text[at + 1 :]
    uri = open_doc(client, model_c, "c", seeded)
    diags = await wait_for(
        client, uri, lambda d: any(x.code == "wrong-zero-point" for x in d), "the wrong-zero-point diagnostic"
    )
    # the hand edit of a generated file is a stale-generated info as well
    assert sorted(str(d.code) for d in diags) == ["stale-generated", "wrong-zero-point"]
    line = seeded.count("\n", 0, at)
    column = at - (seeded.rfind("\n", 0, at) + 1)
    assert [(d.code, d.range, d.message) for d in diags if d.code == "wrong-zero-point"] == [
        (
            "wrong-zero-point",
            lsp.Range(lsp.Position(line, column), lsp.Position(line, column + 3)),
            "output_offset of l0_tfl_unidirectional_sequence_lstm_params is 128, but layer"
            " 'tfl.unidirectional_sequence_lstm' writes 'tfl.unidirectional_sequence_lstm' with zero point 0"
            " (trained_lstm_int8.params.json): it must be the zero point (the hidden state's int8 zero point"
            " (the LSTM's output too)), 0 - 128 is the uint8 habit; an int8 zero point is in [-128, 127]",
        )
    ]
