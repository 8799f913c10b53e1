"""Subcommands of the `fixpoint` CLI, one module each with `register(subparsers)`.

A module's `register` adds its parser and sets `func` (args -> exit code). List new modules in COMMANDS.
"""

COMMANDS = [
    "conformance",
    "cmsis_nn",
    "quantize",
    "evaluate",
    "sensitivity",
    "qat",
    "generate",
    "build",
    "verify",
    "flash_verify",
    "report",
]
