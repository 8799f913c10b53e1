"""Which adapter runs which CMSIS-NN kernel family; kernels without an adapter are skipped, never passed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.conformance.cases import VectorCase
from quantcore.kernels.requantize import Rounding


class Skip(Exception):
    """Raised by an adapter for a case it cannot run yet; the message is the reason printed."""


@dataclass(frozen=True)
class Outcome:
    """What an adapter computed and what the vector expects, both flattened to the C byte order."""

    actual: np.ndarray[Any, Any]
    expected: np.ndarray[Any, Any]


Adapter = Callable[[VectorCase, Rounding], Outcome]

ADAPTERS: dict[str, Adapter] = {}

# (predicate, adapter) pairs for cases recognised by their content rather than their kernel name,
# e.g. whole networks; consulted only when no adapter is registered for the case's kernel.
FALLBACKS: list[tuple[Callable[[VectorCase], bool], Adapter]] = []


def adapter(*kernels: str) -> Callable[[Adapter], Adapter]:
    """Register `fn` as the adapter for each CMSIS-NN kernel family named in `kernels`."""

    def register(fn: Adapter) -> Adapter:
        for kernel in kernels:
            if kernel in ADAPTERS:
                raise RuntimeError(f"two adapters registered for {kernel}")
            ADAPTERS[kernel] = fn
        return fn

    return register


def fallback(predicate: Callable[[VectorCase], bool]) -> Callable[[Adapter], Adapter]:
    """Register `fn` for every case `predicate` accepts whose kernel has no adapter of its own."""

    def register(fn: Adapter) -> Adapter:
        FALLBACKS.append((predicate, fn))
        return fn

    return register


def adapter_for(case: VectorCase) -> Adapter | None:
    load_adapters()
    if case.kernel in ADAPTERS:
        return ADAPTERS[case.kernel]
    return next((fn for accepts, fn in FALLBACKS if accepts(case)), None)


def outcome(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> Outcome:
    return Outcome(np.ascontiguousarray(actual).ravel(), np.ascontiguousarray(expected).ravel())


_loaded = False


def load_adapters() -> dict[str, Adapter]:
    """Import every adapter module (they register themselves) and return the registry."""
    import importlib
    import pkgutil

    from quantcore.conformance import adapters

    global _loaded
    if _loaded:
        return ADAPTERS
    _loaded = True
    for info in pkgutil.iter_modules(adapters.__path__):
        importlib.import_module(f"{adapters.__name__}.{info.name}")
    return ADAPTERS
