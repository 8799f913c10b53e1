"""`generate`: a quantized graph -> model.h, model.c and model_data.c that call CMSIS-NN.

lower.py turns the graph into a Plan (pure data); the templates in templates/model/ turn the plan into C;
files.py stamps each file with its content hash and writes them safely. Rendering is deterministic: the
same graph, sources and settings give byte-identical files, so regenerating rewrites nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quantcore import __version__, limits, untrusted
from quantcore.codegen.files import (
    GENERATION_PLACEHOLDER,
    PLACEHOLDER,
    Outcome,
    Written,
    stamp,
    stamp_generation,
    write_generated,
)
from quantcore.codegen.lower import lower
from quantcore.codegen.plan import Plan
from quantcore.cores import Core
from quantcore.ir import Graph
from quantcore.quantize.document import CMSIS_NN_API
from quantcore.templating import CText, render


@dataclass(frozen=True)
class Sources:
    """The files the graph came from, named with their hashes in every generated header."""

    params: Path | None = None
    model: Path | None = None


@dataclass(frozen=True)
class HeaderInfo:
    version: str
    params_name: str
    params_sha256: str
    model_name: str
    model_sha256: str
    cmsis_nn_api: str


@dataclass(frozen=True)
class GenerateResult:
    out_dir: Path
    plan: Plan
    files: tuple[Written, ...]

    @property
    def changed(self) -> tuple[Written, ...]:
        return tuple(f for f in self.files if f.outcome is not Outcome.UNCHANGED)


def _sha256(path: Path, limit: int) -> str:
    return untrusted.sha256(path, limit=limit)


def _model_sha256(graph: Graph, path: Path) -> str:
    """The model's SHA-256: the import's, when the graph came from that very file (it hashed the bytes it
    read), else the file's."""
    if graph.meta.get("sha256") and graph.meta.get("source") == str(path):
        return str(graph.meta["sha256"])
    return _sha256(path, limits.MODEL_MAX_BYTES)


def header_info(graph: Graph, sources: Sources | None) -> HeaderInfo:
    sources = sources or Sources()
    meta = graph.meta
    if sources.model is not None:
        model_name, model_sha = sources.model.name, _model_sha256(graph, sources.model)
    else:
        model_name = str(meta.get("source_name", meta.get("source", graph.name)))
        model_sha = str(meta.get("sha256", "")) or "unknown"
    if sources.params is not None:
        params_name, params_sha = sources.params.name, _sha256(sources.params, limits.JSON_MAX_BYTES)
    else:
        params_name, params_sha = "(none: generated from a graph in memory)", "unknown"
    return HeaderInfo(__version__, params_name, params_sha, model_name, model_sha, CMSIS_NN_API)


def render_files(plan: Plan, header: HeaderInfo) -> dict[str, str]:
    """File name -> stamped text of the three generated files."""
    p = plan.prefix
    common = {
        "plan": plan,
        "header": header,
        "content_hash": PLACEHOLDER,
        "generation": CText(GENERATION_PLACEHOLDER),
        "header_file": f"{p}.h",
        "arena": f"{p}_arena",
        "scratch": f"{p}_scratch",
        "ctx": f"{p}_ctx",
        "scratch_macro": f"{plan.macro}_SCRATCH_BYTES",
    }
    purposes = {
        f"{p}.h": (
            "model/model.h.j2",
            "the model's API: sizes, quantization of input and output, entry points",
        ),
        f"{p}.c": (
            "model/model.c.j2",
            "one CMSIS-NN call per layer, the activation arena and scratch buffer",
        ),
        f"{p}_data.c": ("model/model_data.c.j2", "weights, biases and per-channel requantization parameters"),
    }
    texts = {
        name: render(template, file_name=name, purpose=purpose, **common)
        for name, (template, purpose) in purposes.items()
    }
    return {name: stamp(text) for name, text in stamp_generation(texts).items()}


def generate(
    qgraph: Graph,
    out_dir: Path,
    *,
    prefix: str = "model",
    core: Core = Core.CORTEX_M4,
    alignment: int = 16,
    force: bool = False,
    sources: Sources | None = None,
) -> GenerateResult:
    """Generate `out_dir`/<prefix>.h, <prefix>.c and <prefix>_data.c for `qgraph` on `core`.

    Raises CodegenError for a graph that cannot be generated and HandEditedError (nothing written) when a
    target file was edited by hand, unless `force` (which keeps a .bak of each replaced file).
    """
    plan = lower(qgraph, prefix=prefix, core=core, alignment=alignment)
    files = render_files(plan, header_info(qgraph, sources))
    written = write_generated(Path(out_dir), files, force=force)
    return GenerateResult(Path(out_dir), plan, tuple(written))
