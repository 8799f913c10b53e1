"""The corpus: every case of issue 17, one registry, in the issue's classes.

injection   hostile names in every place a model or file name reaches generated C
high        output flood, generate's atomicity, a busy serial port, git's fsmonitor and --ref
exhaustion  constant folding without end, FIFOs, /dev/zero, deep trees and JSON, decompression bombs
boundary    paths from settings, a params JSON or a model that leave the workspace
numbers     hand-edited parameters and option values believed without checking
tracebacks  errors that must be one-line messages
unclear     messages that must name the real cause
lsp         the language server against hostile trees and requests
"""

from __future__ import annotations

from tests.hostile.cases_injection import high_cases, injection_cases
from tests.hostile.cases_inputs import boundary_cases, exhaustion_cases
from tests.hostile.cases_numbers import numbers_cases, tracebacks_cases, unclear_cases
from tests.hostile.lsp_cases import lsp_cases
from tests.hostile.runner import Case

CLASSES = ("injection", "high", "exhaustion", "boundary", "numbers", "tracebacks", "unclear", "lsp")


def corpus() -> list[Case]:
    cases = [
        *injection_cases(),
        *high_cases(),
        *exhaustion_cases(),
        *boundary_cases(),
        *numbers_cases(),
        *tracebacks_cases(),
        *unclear_cases(),
        *lsp_cases(),
    ]
    ids = [case.id for case in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate case ids: {duplicates}")
    return cases
