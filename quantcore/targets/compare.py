"""Comparing a firmware transcript with the reference executor, layer by layer and byte by byte.

The reference is int8_exec.run on the same quantized inputs the firmware got; a layer's firmware bytes
must equal the reference tensor's .tobytes() (NHWC, little-endian for int16). Plain functions returning
dataclasses: the CLI and the language server format them their own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quantcore.targets.protocol import Transcript


@dataclass(frozen=True)
class Mismatch:
    """The first differing element of a layer: which case, which channel (NHWC's last axis), where."""

    case: int
    channel: int
    index: tuple[int, ...]
    """The element's position in the case's tensor (NHWC, without the batch axis)."""
    expected: int
    actual: int


@dataclass(frozen=True)
class LayerComparison:
    name: str
    index: int
    bytes: int
    """Bytes per case."""
    mismatched_bytes: int
    """Differing bytes over all cases."""
    first: Mismatch | None


@dataclass(frozen=True)
class Comparison:
    layers: list[LayerComparison]
    outputs_mismatched_bytes: int
    cases: int

    @property
    def mismatched_bytes_total(self) -> int:
        return sum(layer.mismatched_bytes for layer in self.layers) + self.outputs_mismatched_bytes

    @property
    def passed(self) -> bool:
        return self.mismatched_bytes_total == 0


@dataclass(frozen=True)
class ReferenceLayer:
    """One layer's reference outputs for every case: shape (cases, *per-case shape), int8 or int16."""

    name: str
    values: np.ndarray


def compare(reference: Sequence[ReferenceLayer], output: np.ndarray, transcript: Transcript) -> Comparison:
    """Every layer of every case, and the model output, against the reference."""
    layers = [_layer(i, ref, transcript) for i, ref in enumerate(reference)]
    out_mismatch = sum(_count(output[k], case.output)[0] for k, case in enumerate(transcript.cases))
    return Comparison(layers, out_mismatch, len(transcript.cases))


def _layer(i: int, ref: ReferenceLayer, transcript: Transcript) -> LayerComparison:
    total, first = 0, None
    for k, case in enumerate(transcript.cases):
        count, where = _count(ref.values[k], case.layers[i][1])
        total += count
        if first is None and where is not None:
            first = _mismatch(k, ref.values[k], case.layers[i][1], where)
    return LayerComparison(ref.name, i, ref.values[0].nbytes, total, first)


def _count(expected: np.ndarray, actual: bytes) -> tuple[int, int | None]:
    """Differing bytes and the first differing byte offset (a size difference counts every missing byte)."""
    want = np.frombuffer(np.ascontiguousarray(expected).tobytes(), np.uint8)
    got = np.frombuffer(actual, np.uint8)
    n = min(len(want), len(got))
    diff = np.flatnonzero(want[:n] != got[:n])
    count = len(diff) + abs(len(want) - len(got))
    first = int(diff[0]) if len(diff) else (n if len(want) != len(got) else None)
    return count, first


def _mismatch(case: int, expected: np.ndarray, actual: bytes, byte: int) -> Mismatch:
    element = byte // expected.itemsize
    flat = np.ascontiguousarray(expected).reshape(-1)
    got = np.frombuffer(
        actual[: len(actual) - len(actual) % expected.itemsize], expected.dtype.newbyteorder("<")
    )
    shape = expected.shape or (1,)
    index = tuple(int(v) for v in np.unravel_index(min(element, flat.size - 1), shape))
    actual_value = int(got[element]) if element < got.size else 0
    return Mismatch(case, index[-1], index, int(flat[min(element, flat.size - 1)]), actual_value)
