"""stale-generated: generated sources that no longer match their inputs, or that were edited by hand.

Every file `fixpoint generate` writes names the quant-params JSON and the model it came from with their
SHA-256, and carries the hash of its own content (quantcore.codegen.files). So, without timestamps:
- the named JSON or model exists in the workspace (the project's, or a file of that name next to the
  generated folder or anywhere in the tree) and its bytes hash differently: the code is stale;
- the file's content no longer matches its own hash: someone edited it, and regenerating would lose
  the edit (the Regenerate command refuses unless forced, and then keeps a .bak);
- the named JSON is nowhere to be found: reported as information (the code cannot be checked);
- the files of one folder carry different generation ids (one was copied in from another run, or a
  regeneration was cut short by hand): the build stops at their #error, so it is flagged here first.
Each stale, mixed or edited file offers "Regenerate model".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fixpoint_server.findings import Code, Finding, Fix, Severity, Span
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from fixpoint_server.rules.incremental import file_summaries, split_check
from quantcore.codegen.files import GeneratedHeader, SourceRecord, is_intact, read_header

CODES = (Code.STALE_GENERATED,)
READS = Reads(
    contents=frozenset({FileKind.C_SOURCE, FileKind.C_HEADER, FileKind.PARAMS_JSON, FileKind.MODEL}),
    outside=True,
)
"""A generated file's header, and the bytes on disk of the JSON and model it names."""
PER_FILE = frozenset({FileKind.C_SOURCE, FileKind.C_HEADER})
"""A file's stale and edited findings are its own; mixed generations compare the files of a folder."""
REGENERATE = "fixpoint.regenerateModel"


def check(ctx: CheckContext) -> list[Finding]:
    return split_check(ctx, PER_FILE, prepare, check_file, check_rest)


def prepare(ctx: CheckContext) -> None:
    return None


def check_file(ctx: CheckContext, path: Path, shared: None) -> list[Finding]:
    header = ctx.derived("generated-header", path, read_header)  # cached until the file changes
    if header is None:
        return []
    findings = list(_sources(ctx, path, header))
    if not ctx.derived("intact", path, is_intact):
        findings.append(_edited(ctx, path, header))
    return findings


def check_rest(ctx: CheckContext, shared: None) -> list[Finding]:
    """Mixed generations, over the generated files only (the C scanner has already told which they are:
    its `generated` is read_header's answer)."""
    generated = file_summaries(ctx, "generated", lambda cfile: cfile.generated is not None)
    headers: dict[Path, GeneratedHeader] = {}
    for path in sorted((p for p, yes in generated.items() if yes), key=str):
        header = ctx.derived("generated-header", path, read_header)
        if header is not None:
            headers[path] = header
    return list(_mixed_generations(ctx, headers))


def _mixed_generations(ctx: CheckContext, headers: dict[Path, GeneratedHeader]) -> Iterator[Finding]:
    """Files of one folder from different runs: each file whose id differs from its folder's header's
    (the .h every generated .c checks against; the most common id when there is no .h)."""
    folders: dict[Path, dict[Path, GeneratedHeader]] = {}
    for path, header in headers.items():
        if header.generation is not None:
            folders.setdefault(path.parent, {})[path] = header
    for files in folders.values():
        ids = [h.generation for h in files.values()]
        if len(set(ids)) < 2:
            continue
        reference = next((p for p in sorted(files) if p.suffix == ".h"), None)
        expected = files[reference].generation if reference else max(set(ids), key=ids.count)
        for path, header in sorted(files.items()):
            if header.generation != expected:
                yield _mixed(ctx, path, header, expected, reference)


def _mixed(
    ctx: CheckContext, path: Path, header: GeneratedHeader, expected: str | None, reference: Path | None
) -> Finding:
    other = reference.name if reference else "the other generated files"
    return Finding(
        Code.STALE_GENERATED,
        f"{path.name} comes from another run of fixpoint generate than {other} (generation"
        f" {header.generation}, not {expected}): the build stops at its #error; regenerate all of them",
        path, Span.at(header.generation_line, 0, 120), fixes=(regenerate_fix(ctx),),
    )  # fmt: skip


def regenerate_fix(ctx: CheckContext, force: bool = False) -> Fix:
    title = "Regenerate model (overwrite the edits, keep a .bak)" if force else "Regenerate model"
    return Fix(title, command=REGENERATE, arguments=(str(ctx.root), force), preferred=not force)


def _sources(ctx: CheckContext, path: Path, header: GeneratedHeader) -> Iterator[Finding]:
    for role, record in (("parameters", header.params), ("model", header.model)):
        if record is None or record.sha256 == "unknown":
            continue
        source = _find(ctx, path, record, FileKind.PARAMS_JSON if role == "parameters" else FileKind.MODEL)
        span = Span.at(record.line, 0, 3 + len(record.name) + 80)
        if source is None:
            if role == "parameters":
                yield Finding(
                    Code.STALE_GENERATED,
                    f"generated from {record.name}, which is not in the workspace: cannot tell whether"
                    " this code is up to date",
                    path, span, Severity.INFO,
                )  # fmt: skip
            continue
        actual = ctx.file_sha256(source)
        if actual is not None and actual != record.sha256:
            yield Finding(
                Code.STALE_GENERATED,
                f"stale: generated from {ctx.relative(source)} with sha256 {record.sha256[:12]}..., but the"
                f" {role} file now has {actual[:12]}...; regenerate the model sources",
                path, span, fixes=(regenerate_fix(ctx),),
                data={"source": str(source), "recorded": record.sha256, "actual": actual},
            )  # fmt: skip


def _edited(ctx: CheckContext, path: Path, header: GeneratedHeader) -> Finding:
    return Finding(
        Code.STALE_GENERATED,
        f"{path.name} was edited by hand since Fixpoint generated it (its content-sha256 no longer matches):"
        " regenerating will refuse until the edit moves to your own sources, or is forced (keeps a .bak)",
        path,
        Span.at(header.hash_line, 0, 200),
        fixes=(regenerate_fix(ctx, force=True),),
    )


def _find(ctx: CheckContext, generated: Path, record: SourceRecord, kind: FileKind) -> Path | None:
    """The workspace file the header names: the project's own first, then the nearest of that name."""
    configured = ctx.project.params if kind is FileKind.PARAMS_JSON else ctx.project.model
    if configured is not None and configured.name == record.name and configured.is_file():
        return configured.resolve()
    same_name = [p for p in ctx.files_of(kind) if p.name == record.name]
    if not same_name:
        return None
    return min(same_name, key=lambda p: (_distance(p, generated), str(p)))


def _distance(a: Path, b: Path) -> int:
    common = len(Path(*_common(a.parent.parts, b.parent.parts)).parts)
    return len(a.parent.parts) + len(b.parent.parts) - 2 * common


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        out.append(x)
    return tuple(out) or ("/",)
