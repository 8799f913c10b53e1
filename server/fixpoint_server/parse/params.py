"""A quant-params JSON as the rules read it: the document, where each value is, what is wrong with it.

A file that is not valid JSON or fails the schema is still a ParamsFile (with `document` None and its
problems placed at their JSON paths), so the editor can show the problem on the exact line. The
quantized model (the JSON applied to its float model) is built lazily, only for rules that compare C
code with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixpoint_server.findings import Span
from fixpoint_server.parse.json_positions import Located, locate
from quantcore.ir import Graph, Node

if TYPE_CHECKING:
    from fixpoint_server.rules.context import CheckContext

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class ParamsProblem:
    path: JsonPath
    message: str
    span: Span


@dataclass
class ParamsFile:
    path: Path
    digest: str
    located: Located | None
    """None when the text is not JSON."""
    document: dict[str, Any] | None
    """The document when it passed the schema and the semantic checks, else None."""
    problems: list[ParamsProblem] = field(default_factory=list)

    def span(self, path: JsonPath) -> Span:
        return self.located.span(path) if self.located else Span.at(0)

    def key_span(self, path: JsonPath) -> Span:
        return self.located.key_span(path) if self.located else Span.at(0)

    @property
    def raw(self) -> Any:
        """The decoded JSON even when it failed validation (None if it is not JSON)."""
        return self.located.value if self.located else None

    def finetuned_path(self) -> Path | None:
        """The sidecar of fine-tuned weights the document names (QAT), if it names one."""
        entry = self.document.get("finetuned") if self.document is not None else None
        return self.path.parent / entry["weights"] if entry else None

    def model_path(self, ctx: CheckContext) -> Path | None:
        """The float model: the project's when this is the project's JSON, else the one the JSON names."""
        if ctx.project.params is not None and ctx.project.params.resolve() == self.path.resolve():
            model = ctx.project.model
            if model is not None and model.is_file():
                return model.resolve()
        raw = self.raw
        recorded = raw.get("model", {}).get("path") if isinstance(raw, dict) else None
        if not isinstance(recorded, str):
            return None
        candidate = self.path.parent / recorded
        return candidate.resolve() if candidate.is_file() else None


def read_params(path: Path, text: str) -> ParamsFile:
    from fixpoint_server.rules.context import digest
    from quantcore.quantize import params_json

    key = digest(text)
    try:
        located = locate(text)
    except json.JSONDecodeError as exc:
        span = Span.at(exc.lineno - 1, exc.colno - 1, 1)
        return ParamsFile(path, key, None, None, [ParamsProblem((), f"invalid JSON: {exc.msg}", span)])
    except RecursionError:
        return ParamsFile(path, key, None, None, [ParamsProblem((), "JSON nested too deeply", Span.at(0))])
    problems = params_json.validate(located.value)
    if problems:
        placed = [ParamsProblem(p.path, p.message, located.span(p.path)) for p in problems]
        return ParamsFile(path, key, located, None, placed)
    return ParamsFile(path, key, located, located.value)


@dataclass(frozen=True)
class QuantizedModel:
    """The int8 graph defined by a JSON and its float model, and where each layer's entry is."""

    graph: Graph
    model: Path
    error: str | None = None
    """Why the graph could not be built (then `graph` is empty); shown by the rules that need it."""

    def layer(self, name: str) -> Node | None:
        return next((n for n in self.graph.nodes if n.name == name), None)


def quantize_from(params: ParamsFile, model: Path) -> QuantizedModel:
    """Apply the JSON to its model as `fixpoint generate` does; any failure becomes `error`."""
    from quantcore import pipeline
    from quantcore.errors import QuantcoreError
    from quantcore.quantize.document import finetuned_weights, from_document

    assert params.document is not None
    try:
        loaded = pipeline.load_model(model)
        pipeline.check_same_model(loaded, params.document, str(params.path))
        finetuned = finetuned_weights(params.document, params.path)
        return QuantizedModel(from_document(loaded.graph, params.document, finetuned), model)
    except (QuantcoreError, OSError, ValueError, KeyError) as exc:
        return QuantizedModel(Graph("empty", {}, (), (), ()), model, str(exc))  # nothing to compare with
