"""Loading one test-vector case from disk, with look-ups that tolerate CMSIS-NN's naming variants."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from quantcore.errors import VectorCaseError

Array = np.ndarray[Any, Any]
"""An array as the .npz holds it: its dtype is whatever the case's C header declared (int8, int16, int32,
int64), known only when the file is read."""


@dataclass(frozen=True)
class VectorCase:
    """One case: its kernel family, name, C defines and arrays (loaded lazily from the .npz)."""

    kernel: str
    name: str
    json_path: Path
    defines: dict[str, int | float | str]
    array_specs: dict[str, tuple[str, int]] = field(repr=False)

    @classmethod
    def load(cls, json_path: Path) -> VectorCase:
        try:
            meta = json.loads(json_path.read_text())
            return cls(
                kernel=str(meta["kernel"]),
                name=str(meta["case"]),
                json_path=json_path,
                defines=dict(meta.get("defines", {})),
                array_specs={k: (str(v[0]), int(v[1])) for k, v in meta.get("arrays", {}).items()},
            )
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise VectorCaseError(str(json_path), f"not a valid case description ({exc})") from exc

    @property
    def npz_path(self) -> Path:
        return self.json_path.with_suffix(".npz")

    @property
    def prefix(self) -> str:
        """The lower-case prefix of the case's array names (its name), e.g. 'conv_2'."""
        return self.name

    @cached_property
    def arrays(self) -> dict[str, Array]:
        try:
            with np.load(self.npz_path) as npz:
                return {k: npz[k] for k in npz.files}
        except (OSError, ValueError) as exc:
            raise VectorCaseError(str(self.npz_path), f"cannot read the arrays ({exc})") from exc

    def define(self, key: str, default: int | None = None) -> int:
        """The integer define `<CASE>_<key>` (e.g. define('INPUT_W') -> BASIC_INPUT_W), or `default`."""
        full = f"{self.name.upper()}_{key}"
        if full in self.defines:
            return integer_define(self.defines[full], full, self.json_path)
        if default is None:
            raise VectorCaseError(str(self.json_path), f"define {full} is missing")
        return default

    def has_define(self, key: str) -> bool:
        return f"{self.name.upper()}_{key}" in self.defines

    @overload
    def array(self, *suffixes: str, required: Literal[True] = True) -> Array: ...

    @overload
    def array(self, *suffixes: str, required: bool) -> Array | None: ...

    def array(self, *suffixes: str, required: bool = True) -> Array | None:
        """The first array `<case>_<suffix>` that exists among `suffixes` (CMSIS-NN's data mixes
        e.g. `biases`/`bias` and `output_ref`/`output`)."""
        for suffix in suffixes:
            name = f"{self.prefix}_{suffix}"
            if name in self.arrays:
                return self.arrays[name]
        if required:
            wanted = " or ".join(f"{self.prefix}_{s}" for s in suffixes)
            raise VectorCaseError(str(self.npz_path), f"array {wanted} is missing")
        return None

    def nhwc_input(self) -> Array:
        """The case's `input` array as (INPUT_BATCHES, INPUT_H, INPUT_W, IN_CH), as conv tests wire it."""
        shape = tuple(self.define(k) for k in ("INPUT_BATCHES", "INPUT_H", "INPUT_W", "IN_CH"))
        return self.array("input").reshape(shape)

    def raw_array(self, name: str) -> Array:
        """An array by its full C name."""
        if name not in self.arrays:
            raise VectorCaseError(str(self.npz_path), f"array {name} is missing")
        return self.arrays[name]


def discover(root: Path) -> list[VectorCase]:
    """Every case under `root` (any depth), sorted by kernel then case name."""
    cases = [VectorCase.load(p) for p in sorted(root.rglob("*.json")) if p.with_suffix(".npz").exists()]
    return sorted(cases, key=lambda c: (c.kernel, c.name))


def integer_define(value: int | float | str, name: str, json_path: Path) -> int:
    """A define's value as the C int its kernel call passes; the converter writes only plain-number
    defines, so anything else is a damaged case file."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise VectorCaseError(str(json_path), f"define {name} is {value!r}, not an integer")
    return value
