"""Which adapter runs which CMSIS-NN kernel family; kernels without an adapter are skipped, never passed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.conformance.cases import VectorCase
from quantcore.kernels.requantize import Rounding


class Skip(Exception):  # noqa: N818 - a control-flow signal, not an error the user sees as such
    """Raised by an adapter for a case it cannot run yet; the message is the reason printed."""


@dataclass(frozen=True)
class Outcome:
    """What an adapter computed and what the vector expects, both flattened to the C byte order."""

    actual: np.ndarray[Any, Any]
    expected: np.ndarray[Any, Any]


Adapter = Callable[[VectorCase, Rounding], Outcome]

ADAPTERS: dict[str, Adapter] = {}


def adapter(*kernels: str) -> Callable[[Adapter], Adapter]:
    """Register `fn` as the adapter for each CMSIS-NN kernel family named in `kernels`."""

    def register(fn: Adapter) -> Adapter:
        for kernel in kernels:
            if kernel in ADAPTERS:
                raise RuntimeError(f"two adapters registered for {kernel}")
            ADAPTERS[kernel] = fn
        return fn

    return register


def outcome(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> Outcome:
    return Outcome(np.ascontiguousarray(actual).ravel(), np.ascontiguousarray(expected).ravel())


def load_adapters() -> dict[str, Adapter]:
    """Import every adapter module (they register themselves) and return the registry."""
    import importlib
    import pkgutil

    from quantcore.conformance import adapters

    for info in pkgutil.iter_modules(adapters.__path__):
        importlib.import_module(f"{adapters.__name__}.{info.name}")
    return ADAPTERS
