"""Nothing in quantcore or the language server is defined and never used (issue 22): vulture over the
packages, the tests, the benchmarks and the examples finds no function, method, property or class that
nothing names. Framework entry points are named elsewhere than in Python: the conformance adapters and the
LSP handlers are registered by their decorators, the plan's properties are read by the jinja2 templates,
and the rest are overrides a library calls (torch, pygls, watchdog)."""

from __future__ import annotations

from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parents[1]
REGISTERED_BY = ["@adapter", "@fallback", "@server.feature"]
CALLED_ELSEWHERE = [
    "buffer_size_function",  # templates/model/*.j2
    "from_nchw",  # templates/model/model.h.j2
    "forward",  # torch.nn.Module
    "structure_message",  # pygls's JsonRPCProtocol
    "lsp_shutdown",  # pygls's LanguageServerProtocol
    "on_any_event",  # watchdog's FileSystemEventHandler
]


def test_every_definition_in_the_packages_is_used_somewhere() -> None:
    scan = Vulture(ignore_decorators=REGISTERED_BY, ignore_names=CALLED_ELSEWHERE)
    scan.scavenge([str(ROOT / part) for part in ("quantcore", "server", "tests", "bench", "examples")])
    packages = (ROOT / "quantcore", ROOT / "server" / "fixpoint_server")
    unused = [
        f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno} {item.typ} {item.name}"
        for item in scan.get_unused_code(min_confidence=60)
        if item.typ in ("function", "method", "property", "class")
        and any(Path(item.filename).resolve().is_relative_to(package) for package in packages)
    ]
    assert unused == []
