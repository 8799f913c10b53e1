"""Hover on a layer's code: its scales, zero points, multiplier/shift with the real factor they stand for,
and the layer's error from the last evaluation or verification.

A layer is recognised by the generated naming (`l3_conv2_params`, `model_l3_conv2_bias`: layer index 3)
or by a layer name appearing as an identifier; its entry comes from the quant-params JSON the file was
generated from (or the project's).

Hover on a recurrent kernel's name (arm_lstm_unidirectional_s8 ...) or on one of the structs it takes
(cmsis_nn_lstm_params ...): its arguments or fields and what each is (kernel_docs.py), with or without a
JSON; a recurrent layer's hover lists its params the same way.

Hover on a finding: the explanation of its rule (what it checks, why it matters, how to fix), for
editors that show no link to it (Neovim shows the diagnostic's message but not its codeDescription).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixpoint_server.features.kernel_docs import kernel_markdown, layer_rows
from fixpoint_server.findings import Code
from fixpoint_server.parse.params import ParamsFile
from fixpoint_server.rules.context import CheckContext
from quantcore import display
from quantcore.codegen.files import read_header
from quantcore.codegen.names import c_identifier

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GENERATED = re.compile(r"(?:^|_)l(\d+)_")
MAX_CHANNELS = 8


def hover_markdown(
    ctx: CheckContext, path: Path, line: int, column: int, report: dict[str, Any] | None
) -> str | None:
    text = ctx.text(path)
    if text is None:
        return None
    word = _word_at(text, line, column)
    if word is None:
        return None
    kernel = kernel_markdown(word)
    if kernel is not None:
        return kernel
    params = _params_for(ctx, text)
    if params is None or params.document is None:
        return None
    layer = _layer_of(params.document["layers"], word)
    return None if layer is None else describe(params, layer, report)


def explain_rules(codes: Iterable[Code]) -> str | None:
    """The explanations of the rules `codes` (each once, in the order given), as one Markdown hover."""
    unique = list(dict.fromkeys(codes))
    if not unique:
        return None
    return "\n\n---\n\n".join(
        f"**{c.code}** ({c.default_severity.value} by default): {c.summary}\n\n{c.explanation}"
        for c in unique
    )


def _word_at(text: str, line: int, column: int) -> str | None:
    lines = text.split("\n")
    if line >= len(lines):
        return None
    for match in _WORD.finditer(lines[line]):
        if match.start() <= column <= match.end():
            return match.group()
    return None


def _params_for(ctx: CheckContext, text: str) -> ParamsFile | None:
    files = ctx.params_files()
    header = read_header(text)
    if header is not None and header.params is not None:
        named = [p for p in files if p.path.name == header.params.name]
        if named:
            return named[0]
    configured = ctx.project.params
    own = [p for p in files if configured is not None and p.path == configured.resolve()]
    candidates = own or files
    return candidates[0] if candidates else None


def _layer_of(layers: list[dict[str, Any]], word: str) -> dict[str, Any] | None:
    match = _GENERATED.search(word)
    if match and int(match.group(1)) < len(layers):
        layer = layers[int(match.group(1))]
        if c_identifier(layer["name"]) in word:
            return layer
    by_ident = {c_identifier(layer["name"]): layer for layer in layers}
    return by_ident.get(word)


def describe(params: ParamsFile, layer: dict[str, Any], report: dict[str, Any] | None) -> str:
    assert params.document is not None
    tensors = params.document["tensors"]
    title = f"**{_md(layer['name'])}** - {_md(layer['op'])}, {_code(layer.get('kernel'))}"
    lines = [f"{title} ({_md(params.path.name)})", ""]
    for role in ("inputs", "outputs"):
        for name in layer.get(role, []):
            t = tensors.get(name, {})
            quant = f"scale {_num(t.get('scale'))}, zero point {t.get('zero_point')}, {t.get('dtype')}"
            lines.append(f"- {role[:-1]} {_code(name)}: {quant}")
    p = layer.get("params", {})
    if "input_offset" in p or "output_offset" in p:
        lines.append(f"- input_offset {p.get('input_offset')}, output_offset {p.get('output_offset')}")
    lines += layer_rows(layer)
    if isinstance(p.get("multiplier"), list):
        lines += ["", "| channel | multiplier | shift | factor |", "|---|---|---|---|"]
        for c, (m, s) in enumerate(zip(p["multiplier"], p["shift"], strict=False)):
            if c == MAX_CHANNELS:
                lines.append(f"| ... {len(p['multiplier']) - MAX_CHANNELS} more | | | |")
                break
            lines.append(f"| {c} | {m} | {s} | {m / 2**31 * 2.0**s:.6g} |")
    error = _layer_error(report, layer["name"])
    if error:
        lines += ["", error]
    return "\n".join(lines)


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&:\"'])")


def _md(text: object) -> str:
    """A name from a file as plain Markdown text: shortened, on one line, every character Markdown
    could read as markup (a link, an image fetched from anywhere, HTML) escaped."""
    return _MARKDOWN.sub(r"\\\1", display.shown(str(text)))


def _code(text: object) -> str:
    """A name from a file as a Markdown code span (nothing inside one is markup; a backtick in the name,
    which would end it, becomes a quote)."""
    return "`" + display.shown(str(text)).replace("`", "'") + "`"


def _layer_error(report: dict[str, Any] | None, name: str) -> str | None:
    if not report:
        return None
    for layer in report.get("layers", []):
        if layer.get("name") != name:
            continue
        parts = []
        if layer.get("sqnr_db") is not None:
            parts.append(f"SQNR {layer['sqnr_db']:.2f} dB, cosine {layer.get('cosine', float('nan')):.5f}")
        if layer.get("float_sqnr_db") is not None:
            parts.append(f"float SQNR {layer['float_sqnr_db']:.2f} dB")
        if "mismatched_bytes" in layer:
            parts.append(f"{layer['mismatched_bytes']} mismatched bytes on {report.get('target')}")
        return f"last {report.get('kind', 'report')}: " + ", ".join(parts)
    return None


def _num(value: Any) -> str:
    if isinstance(value, list):
        return f"[{', '.join(f'{v:.4g}' for v in value[:4])}{', ...' if len(value) > 4 else ''}]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)
