"""A quant-params JSON as the rules read it: the document, where each value is, what is wrong with it.

A file that is not valid JSON or fails the schema is still a ParamsFile (with `document` None and its
problems placed at their JSON paths), so the editor can show the problem on the exact line. A document
whose structure is valid but whose integers do not follow from its scales keeps its `document` (the other
rules still read it); those problems are in `inconsistent`, and the values a layer says were set by hand
in `overrides`. The quantized model (the JSON applied to its float model) is built lazily, only for rules
that compare C code with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fixpoint_server.findings import Span
from fixpoint_server.parse.digest import digest
from fixpoint_server.parse.json_positions import Located, locate
from quantcore.ir import Graph, Node
from quantcore.project import Project
from quantcore.quantize import consistency, params_checks, params_json
from quantcore.quantize.params_json import QuantParamsError
from quantcore.quantize.params_problems import Problem

JsonPath = tuple[str | int, ...]
T = TypeVar("T")


class Snapshot(Protocol):
    """What a ParamsFile reads of the workspace snapshot a check runs on: rules.context.CheckContext is
    one (parse sits below rules, so it is named by what it offers)."""

    @property
    def project(self) -> Project: ...

    @property
    def read_roots(self) -> list[Path]: ...

    def memo(self, key: Any, compute: Callable[[], T]) -> T: ...


@dataclass(frozen=True)
class ParamsProblem:
    path: JsonPath
    message: str
    span: Span
    expected: int | float | None = None
    """The value that would be right, when one follows from the rest of the document."""


@dataclass
class ParamsFile:
    path: Path
    digest: str
    located: Located | None
    """None when the text is not JSON."""
    document: dict[str, Any] | None
    """The document when it passed the schema and the semantic checks, else None."""
    problems: list[ParamsProblem] = field(default_factory=list)
    """Why `document` is None: not JSON, or a schema or semantic problem."""
    inconsistent: list[ParamsProblem] = field(default_factory=list)
    """Integers of a structurally valid document that do not follow from its scales and zero points."""
    overrides: list[ParamsProblem] = field(default_factory=list)
    """Parameters a layer says were set by hand (message: the reason), not checked against the scales."""

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

    def model_path(self, ctx: Snapshot) -> Path | None:
        """The float model: the project's when this is the project's JSON, else the one the JSON names,
        if that path stays inside the workspace (`recorded_model_problem` says why not)."""
        if ctx.project.params is not None and ctx.project.params.resolve() == self.path.resolve():
            model = ctx.project.model
            if model is not None and model.is_file():
                return model.resolve()
        candidate, _ = self._recorded_model(ctx)
        return candidate if candidate is not None and candidate.is_file() else None

    def recorded_model_problem(self, ctx: Snapshot) -> str | None:
        """Why the model path the JSON records cannot be followed (absolute, or out of the workspace)."""
        return self._recorded_model(ctx)[1]

    def _recorded_model(self, ctx: Snapshot) -> tuple[Path | None, str | None]:
        """The model path the JSON records, resolved, or why it cannot be followed; once per snapshot
        (several rules ask, and each answer resolves symlinks through the workspace's roots)."""

        def resolve() -> tuple[Path | None, str | None]:
            raw = self.raw
            model = raw.get("model") if isinstance(raw, dict) else None
            if not isinstance(model, dict) or not isinstance(model.get("path"), str):
                return None, None
            try:
                return params_json.model_path(raw, self.path, ctx.read_roots), None
            except QuantParamsError as exc:
                return None, str(exc).removeprefix(f"{self.path}: ")

        return ctx.memo(("recorded-model", self.path), resolve)


def read_params(path: Path, text: str) -> ParamsFile:
    key = digest(text)
    try:
        located = locate(text)
    except json.JSONDecodeError as exc:  # nested too deep too: locate measures that before it recurses
        span = Span.at(exc.lineno - 1, exc.colno - 1, 1)
        return ParamsFile(path, key, None, None, [ParamsProblem((), f"invalid JSON: {exc.msg}", span)])
    except ValueError as exc:  # an integer of more digits than Python converts
        return ParamsFile(path, key, None, None, [ParamsProblem((), f"invalid JSON: {exc}", Span.at(0))])
    problems = params_checks.validate_structure(located.value)
    if problems:
        return ParamsFile(path, key, located, None, _placed(located, problems))
    document: dict[str, Any] = located.value
    inconsistent = _placed(located, params_checks.consistency_problems(document))
    hand = [ParamsProblem(p, reason, located.span(p)) for p, reason in consistency.overrides(document)]
    return ParamsFile(path, key, located, document, inconsistent=inconsistent, overrides=hand)


def _placed(located: Located, problems: list[Problem]) -> list[ParamsProblem]:
    return [ParamsProblem(p.path, p.message, located.span(p.path), p.expected) for p in problems]


@dataclass(frozen=True)
class QuantizedModel:
    """The int8 graph defined by a JSON and its float model, and where each layer's entry is."""

    graph: Graph
    model: Path
    error: str | None = None
    """Why the graph could not be built (then `graph` is empty); shown by the rules that need it."""

    @classmethod
    def failed(cls, model: Path, error: str) -> QuantizedModel:
        """No graph (nothing to compare the C code with), and why."""
        return cls(Graph("empty", {}, (), (), ()), model, error)

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
        return QuantizedModel.failed(model, str(exc))
