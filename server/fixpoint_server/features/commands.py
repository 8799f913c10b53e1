"""workspace/executeCommand: regenerate, quantize, flash and verify, check the workspace, the last report.

Long commands run the `fixpoint` CLI (argument lists, never a shell string, cwd = the project root) as
jobs off the event loop, forked by a warm worker process that has already imported the engine
(fixpoint_server.worker): a regenerate does not pay interpreter and import start-up each time. Each job
is a session of its own, so the client's cancel of the work-done progress (or of the request) stops the
whole job, QEMU included. Their JSON result is returned to the client and the per-layer table is written
to the log. Checking the workspace runs in the server itself, on the index it already has.

Every path a command reads or writes lies inside the workspace, symlinks resolved
(quantcore.untrusted.require_inside): the ones in its arguments, and the project's own from
fixpoint.toml - a setting that leaves the workspace (`generated = '../escape'`) was refused when the
settings were read, and a command that needs it refuses too, naming fixpoint.toml's line, instead of
writing somewhere else. Arguments of the wrong shape are refused with a message, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from fixpoint_server import settings, worker
from quantcore import display, untrusted
from quantcore.project import read_roots

if TYPE_CHECKING:
    from fixpoint_server.language_server import FixpointServer

REGENERATE = "fixpoint.regenerateModel"
QUANTIZE = "fixpoint.quantize"
FLASH_VERIFY = "fixpoint.flashVerify"
CHECK = "fixpoint.checkWorkspace"
LAST_REPORT = "fixpoint.lastReport"
COMMANDS = (REGENERATE, QUANTIZE, FLASH_VERIFY, CHECK, LAST_REPORT)


class CommandError(Exception):
    """A command that cannot run as asked; the message goes back to the client."""


def register(ls: FixpointServer) -> None:
    for name, handler in _HANDLERS.items():
        ls.command(name)(_guarded(name, handler))


def _guarded(name: str, handler: Any) -> Any:
    # pygls maps the command's arguments onto the handler's parameters (after `ls`) by reading its
    # annotations at run time: *args takes them all, whatever the client sends.
    async def run(ls: Any, *args: Any) -> Any:
        try:
            return dict(await handler(ls, _options(list(args))))
        except CommandError as exc:
            ls.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"{name}: {exc}")
            )
            return {"ok": False, "error": str(exc)}

    return run


def _options(args: list[Any] | None) -> dict[str, Any]:
    """Commands take one object of options; positional [root, force] (as code actions send) also works."""
    if not args:
        return {}
    if isinstance(args[0], dict):
        return dict(args[0])
    if not isinstance(args[0], str):
        raise CommandError(f"expects one object of options, got {display.quoted(json.dumps(args[0]), 80)}")
    return {"root": args[0], "force": args[1] is True if len(args) > 1 else False}


def text_option(options: dict[str, Any], key: str) -> str | None:
    """A string option (None when absent); anything else is refused."""
    value = options.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\0" in value:
        raise CommandError(f'"{key}" must be a string, got {display.quoted(json.dumps(value), 80)}')
    return value


def inside(ls: FixpointServer, value: str | None, what: str) -> Path | None:
    """The path option `value` (relative to the workspace root) resolved, symlinks too; CommandError when
    it leads outside the workspace."""
    if value is None:
        return None
    root = ls.index.root
    path = Path(value)
    try:
        return untrusted.require_inside(path if path.is_absolute() else root / path, root, what)
    except untrusted.UntrustedInputError:
        raise CommandError(f"{what} {display.quoted(value)} is outside the workspace {root}") from None


def project_path(ls: FixpointServer, key: str) -> Path | None:
    """The project's `key` setting (model, params, generated), inside the workspace; CommandError when
    fixpoint.toml set it outside (its file:line says where).

    The model and params files, which a command only reads, may also lie in the git work tree holding
    fixpoint.toml, as `fixpoint` itself reads them (quantcore.project.read_roots): the shipped
    examples/broken, opened as its own workspace, reads `../fashion/model.onnx`. Checked again here,
    symlinks resolved now. The generated folder, which is written, stays inside the workspace."""
    refused = settings.refusal(ls.project_findings, key)
    if refused is not None:
        raise CommandError(refused)
    value: Path | None = getattr(ls.index.project, key)
    project_file = ls.index.project.path
    if value is None or key == "generated" or project_file is None:
        return None if value is None else inside(ls, str(value), key)
    path = value if value.is_absolute() else ls.index.root / value
    for root in [ls.index.root, *read_roots(project_file.parent)]:
        if untrusted.is_inside(path, root):
            return path.resolve()
    raise CommandError(
        f"{key} {display.quoted(str(value))} is outside the workspace {ls.index.root} and the repository"
        " holding fixpoint.toml"
    )


# -- the commands ------------------------------------------------------------------------------------


def _path(ls: FixpointServer, options: dict[str, Any], key: str, setting: str | None = None) -> Path | None:
    """The path option `key`, else the project's `setting`; inside the workspace either way."""
    given = inside(ls, text_option(options, key), key)
    return given if given is not None or setting is None else project_path(ls, setting)


async def regenerate(ls: FixpointServer, options: dict[str, Any]) -> dict[str, Any]:
    project = ls.index.project
    params = _path(ls, options, "params", "params")
    if params is None:
        raise CommandError('no quant-params JSON: set params in fixpoint.toml or pass {"params": PATH}')
    output = _path(ls, options, "output", "generated")
    argv = ["generate", "--params", str(params), "-o", str(output)]
    model = _path(ls, options, "model", "model")
    if model is not None:
        argv += ["--model", str(model)]
    if project.path is not None:
        argv += ["--project", str(project.path)]
    if options.get("force") is True:
        argv.append("--force")
    result = await run_cli(ls, "Regenerating the model sources", [*argv, "--json"])
    for entry in result.get("files", []):
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            ls.index.changed_on_disk(Path(entry["path"]).resolve())
    ls.checker.request()
    return result


async def quantize(ls: FixpointServer, options: dict[str, Any]) -> dict[str, Any]:
    model = _path(ls, options, "model", "model")
    data = _path(ls, options, "data")
    output = _path(ls, options, "output", "params")
    if model is None or data is None or output is None:
        raise CommandError('needs {"model", "data", "output"} (model and output default to fixpoint.toml\'s)')
    argv = ["quantize", str(model), "--calib", str(data), "-o", str(output)]
    method = text_option(options, "method")
    if method is not None:
        argv.append(f"--method={method}")  # one word: a value starting with "-" stays a value
    await run_cli(ls, "Quantizing", argv, expect_json=False)
    report = await run_cli(
        ls, "Evaluating", ["evaluate", str(model), str(output), "--data", str(data), "--json"]
    )
    ls.last_report = {"kind": "evaluation", **report}
    ls.index.changed_on_disk(output)
    ls.checker.request()
    return {"ok": True, "params": str(output), "report": report}


async def flash_verify(ls: FixpointServer, options: dict[str, Any]) -> dict[str, Any]:
    argv = ["flash-verify", "--json"]
    for key in ("target", "serial", "probe"):
        value = text_option(options, key)
        if value is not None:
            argv.append(f"--{key}={value}")  # one word: a value starting with "-" stays a value
    data = _path(ls, options, "data")
    if data is not None:
        argv += ["--data", str(data)]
    if ls.index.project.path is not None:
        argv += ["--project", str(ls.index.project.path)]
    target = text_option(options, "target") or ls.index.project.target
    report = await run_cli(ls, f"Flash and verify ({display.shorten(target, 80)})", argv)
    ls.last_report = {"kind": "verification", **report}
    log_table(ls, report)
    return report


async def check_workspace(ls: FixpointServer, options: dict[str, Any]) -> dict[str, Any]:
    ls.reload_project()
    findings = await ls.checker.run_now()
    counts = Counter(f.code.code for f in findings)
    return {
        "ok": True,
        "findings": len(findings),
        "files": len({f.path for f in findings}),
        "by_code": dict(counts),
        "indexed": len(ls.index.files),
        "runs": ls.checker.runs,
    }


async def last_report(ls: FixpointServer, options: dict[str, Any]) -> dict[str, Any]:
    return {"ok": ls.last_report is not None, "report": ls.last_report}


_HANDLERS = {
    REGENERATE: regenerate,
    QUANTIZE: quantize,
    FLASH_VERIFY: flash_verify,
    CHECK: check_workspace,
    LAST_REPORT: last_report,
}


# -- running the CLI -----------------------------------------------------------------------------------


async def run_cli(
    ls: FixpointServer, title: str, argv: list[str], expect_json: bool = True
) -> dict[str, Any]:
    """Run `fixpoint ARGV` in the project root with progress and cancellation; its JSON result."""
    if not ls.trusted:
        raise CommandError("the workspace is not trusted: builds, flashing and generation are off in it")
    ls.window_log_message(lsp.LogMessageParams(
        type=lsp.MessageType.Info, message="running: " + " ".join(worker.cli_command(argv))
    ))  # fmt: skip
    progress = await _Progress.start(ls, title)
    job = await worker.start_job(argv, ls.index.root, lambda text: _log(ls, text))
    _log(ls, f"job {job.pid} {job.how}")
    # The job is a session of its own: cancelling stops what the CLI started too (QEMU, gdb, the compiler).
    progress.on_cancel(job.stop)
    try:
        returncode, out, err = await job.finish()
    except worker.JobLost as exc:
        progress.end(str(exc))
        raise CommandError(f"{title}: {exc}; run the command again") from None
    except asyncio.CancelledError:  # the request was cancelled, or the server shuts down
        job.stop()
        raise
    progress.end("cancelled" if progress.cancelled else f"exit {returncode}")
    if progress.cancelled:
        raise CommandError(f"{title}: cancelled")
    stderr = err.decode(errors="replace").strip()
    if stderr:
        ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=stderr))
    if not expect_json:
        if returncode != 0:
            raise CommandError(stderr.splitlines()[-1] if stderr else f"exit status {returncode}")
        return {"ok": True}
    try:
        result: dict[str, Any] = _json_result(out.decode(errors="replace"))
    except (ValueError, IndexError):
        raise CommandError(stderr.splitlines()[-1] if stderr else f"no result (exit {returncode})") from None
    result.setdefault("ok", returncode == 0)
    if returncode == 2:
        raise CommandError(result.get("error") or stderr)
    return result


def _log(ls: FixpointServer, text: str) -> None:
    ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=text))


def _json_result(out: str) -> dict[str, Any]:
    """The command's JSON: all of stdout (evaluate prints it indented), else its last line."""
    text = out.strip()
    try:
        result = json.loads(text)
    except ValueError:
        result = json.loads(text.splitlines()[-1])
    if not isinstance(result, dict):
        raise ValueError("not a JSON object")
    return result


def log_table(ls: FixpointServer, report: dict[str, Any]) -> None:
    rows = [f"{'layer':24} {'bytes':>7} {'mismatched':>10}"]
    for layer in report.get("layers", []):
        if not isinstance(layer, dict):
            continue
        name = display.printable(display.shorten(str(layer.get("name")), 80))
        rows.append(f"{name:24} {layer.get('bytes', '')!s:>7} {layer.get('mismatched_bytes')!s:>10}")
    rows.append(f"verdict: {report.get('verdict')}, {report.get('mismatched_bytes_total')} mismatched bytes")
    ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Info, message="\n".join(rows)))


class _Progress:
    """Work-done progress when the client supports it; cancellation through its token."""

    def __init__(self, ls: FixpointServer, token: str | None) -> None:
        self.ls, self.token, self.cancelled = ls, token, False

    @classmethod
    async def start(cls, ls: FixpointServer, title: str) -> _Progress:
        caps = ls.client_capabilities.window
        if caps is None or not caps.work_done_progress:
            return cls(ls, None)
        token = str(uuid.uuid4())
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, cancellable=True))
        return cls(ls, token)

    def on_cancel(self, kill: Any) -> None:
        if self.token is None:
            return
        future = self.ls.work_done_progress.tokens.get(self.token)

        def cancelled(f: Any) -> None:  # a concurrent.futures.Future, cancelled by the client
            if f.cancelled():
                self.cancelled = True
                kill()

        if future is not None:
            future.add_done_callback(cancelled)

    def end(self, message: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(self.token, None)
