"""Argument types shared by the subcommands: a value argparse accepts is a value the command can use.

`--alignment 0`, `--workers 0`, `--timeout nan` or `--gdb-port 99999` were once accepted and failed (or
silently became something else) deep inside a command. Each type here refuses at parsing time, so the
user gets `fixpoint generate: argument --alignment: ...` and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeAlias, TypeVar

from quantcore import limits

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What `add_subparsers` returns; each command module's `register(sub)` adds its parser to it (a string:
argparse's class is generic only in its type stubs)."""

N = TypeVar("N", int, float)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


def integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An int in [low, high] (either end open when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {_range(low, high)}, got {value}")
        return value

    return parse


def number(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite float in [low, high] ((low, high] with low_open); NaN and infinities are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or value > high or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"must be a number in {bracket}{low:g}, {high:g}], got {text}")
        return value

    return parse


def _range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"from {low:,} to {high:,}"
    return f"at least {low:,}" if low is not None else f"at most {high:,}"


def positive(kind: Callable[[str], N]) -> Callable[[str], N]:
    """A finite number of `kind` (int or float) greater than 0 (--samples, --epochs, --lr ...)."""

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    return parse


POSITIVE = positive(int)
"""A count that must be at least one."""


def size(text: str) -> int:
    """A byte count: 524288, "512K", "2M" (K = 1024), as fixpoint.toml writes sizes."""
    from quantcore.project import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


WORKERS = integer(1, 256)
"""Processes to calibrate in."""

CASES = integer(1, limits.MAX_TEST_CASES)
"""Test cases built into a firmware image."""

MAX_PORT = 65535


def PORT(text: str) -> int:
    """A TCP port number: 1 to 65535, or 0 for one the system picks."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"{value} is not a TCP port: give 1 to {MAX_PORT}, or 0 for a free one"
        )
    return value


TIMEOUT = number(0.0, 86_400.0, low_open=True)
"""Seconds a firmware or a tool may run: more than nothing, at most a day."""

PERCENTILE = number(0.0, 100.0, low_open=True)


def alignment(text: str) -> int:
    """A power of two from 4 (int32 arrays need it) to 4096 bytes."""
    value = integer(4, 4096)(text)
    if value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two from 4 to 4096, got {value}")
    return value


def identifier(text: str) -> str:
    """A C identifier of at most 64 characters (it names files and symbols)."""
    if not _IDENTIFIER.match(text):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a C identifier (letters, digits and _, not starting with a digit,"
            " at most 64 characters)"
        )
    return text
