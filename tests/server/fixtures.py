"""Workspaces for the server's tests: a real model, its quant-params JSON and the C Fixpoint generates.

Plain functions (pytest fixtures can wrap them): `generated_project(root)` writes residual_cnn()'s ONNX,
the golden residual.params.json and the generated sources into `root`, exactly as `fixpoint quantize`
+ `fixpoint generate` would leave a firmware tree; `context(root, ...)` builds the CheckContext the
server would build over it, optionally with edited texts shadowing the disk (as open editor buffers
do). `apply_edits` applies a Fix's edits to a text, to check that a quick fix really fixes.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.findings import Edit, LineIndex
from fixpoint_server.rules.context import CheckContext, FactsCache, classify

from quantcore.project import Project

GOLDEN = Path(__file__).resolve().parents[1] / "codegen" / "golden" / "residual"
PARAMS = GOLDEN / "residual.params.json"


@dataclass(frozen=True)
class GeneratedProject:
    root: Path
    model: Path
    params: Path
    generated: Path

    @property
    def project(self) -> Project:
        return Project(model=self.model, params=self.params, generated=self.generated)

    def source(self, name: str) -> Path:
        return self.generated / name


def generated_project(
    root: Path, *, alignment: int = 16, model_dir: Path | None = None, generated: Path | None = None
) -> GeneratedProject:
    """residual.onnx + residual.params.json (in `model_dir`, default `root`) and the generated
    model.h, model.c, model_data.c (in `generated`, default root/generated)."""
    import onnx

    from quantcore import pipeline
    from quantcore.codegen.generate import Sources, generate
    from quantcore.cores import Core
    from quantcore.quantize import params_json
    from quantcore.quantize.document import from_document
    from tests.onnx_models import residual_cnn

    folder, out = model_dir or root, generated or root / "generated"
    folder.mkdir(parents=True, exist_ok=True)
    model, params = folder / "residual.onnx", folder / "residual.params.json"
    onnx.save(residual_cnn(), model)
    shutil.copyfile(PARAMS, params)
    qgraph = from_document(pipeline.load_model(model).graph, params_json.load(params))
    generate(qgraph, out, core=Core.CORTEX_M4, sources=Sources(params, model), alignment=alignment)
    return GeneratedProject(root, model, params, out)


def copy_project(source: GeneratedProject, root: Path) -> GeneratedProject:
    """A copy of a generated project (generating once per session and copying keeps tests fast)."""
    shutil.copytree(source.root, root, dirs_exist_ok=True)
    return GeneratedProject(
        root,
        root / source.model.name,
        root / source.params.name,
        root / source.generated.relative_to(source.root),
    )


def context(
    root: Path,
    project: Project | None = None,
    texts: Mapping[Path, str] | None = None,
    cache: FactsCache | None = None,
) -> CheckContext:
    """The CheckContext over every file of `root` the rules read; `texts` shadow files (or add them)."""
    texts = dict(texts or {})
    files = {p.resolve(): kind for p in root.rglob("*") if p.is_file() and (kind := classify(p)) is not None}
    files.update({p.resolve(): kind for p in texts if (kind := classify(p)) is not None})
    shadow = {p.resolve(): t for p, t in texts.items()}

    def read(path: Path) -> str | None:
        if path in shadow:
            return shadow[path]
        try:
            return path.read_text()
        except (OSError, UnicodeDecodeError):
            return None

    return CheckContext(root.resolve(), project or Project(), files, read, cache or FactsCache())


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with the edits applied (their spans refer to the original text, as LSP edits do)."""
    index = LineIndex(text)
    ranges = [
        (
            index.offset(e.span.line, e.span.column),
            index.offset(e.span.end_line, e.span.end_column),
            e.new_text,
        )
        for e in edits
    ]
    ranges.sort(key=lambda r: (r[0], r[1]), reverse=True)
    for start, end, new in ranges:
        text = text[:start] + new + text[end:]
    return text
