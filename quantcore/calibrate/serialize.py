"""Observers to and from .npz, to send a shard's statistics to the process that merges them.

One file holds any number of observers as flat arrays (no pickle): names, bins, exponent, first, zeros,
min, max per observer, and counts_<i> for the i-th one; an empty observer has an empty counts_<i>.
Loading rebuilds each through Observer.from_dict, so a file is validated exactly like a dict record.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any

import numpy as np

from quantcore.calibrate.errors import ObserverFormatError
from quantcore.calibrate.observer import FORMAT, FORMAT_VERSION, Observer

NpzFile = str | os.PathLike[str] | IO[bytes]
_INTS = ("bins", "exponent", "first", "zeros")
_FLOATS = ("min", "max")


def save_npz(file: NpzFile, observers: Iterable[Observer]) -> None:
    """Write the observers (distinct tensor names) to one .npz file."""
    records = [o.to_dict() for o in observers]
    names = [r["name"] for r in records]
    if len(set(names)) != len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise ObserverFormatError(f"save_npz: observers of the same tensor given twice: {duplicates}")
    arrays: dict[str, Any] = {"format": np.array(FORMAT), "version": np.array(FORMAT_VERSION)}
    arrays["names"] = np.array(names, dtype=np.str_)
    for key in _INTS:
        arrays[key] = np.array([r[key] or 0 for r in records], dtype=np.int64)
    for key in _FLOATS:
        arrays[key] = np.array([np.nan if r[key] is None else r[key] for r in records], dtype=np.float64)
    for i, record in enumerate(records):
        arrays[f"counts_{i}"] = np.array(record["counts"], dtype=np.int64)
    np.savez(file, **arrays)


def load_npz(file: NpzFile) -> dict[str, Observer]:
    """The observers in a file written by save_npz, by tensor name."""
    try:
        with np.load(file, allow_pickle=False) as data:
            return {o.name: o for o in (Observer.from_dict(r) for r in _records(data))}
    except (KeyError, ValueError, OSError) as error:
        raise ObserverFormatError(f"load_npz: not a readable observer file: {error}") from error


def _records(data: Any) -> list[dict[str, Any]]:
    header = {"format": str(data["format"]), "version": int(data["version"])}
    records = []
    for i, name in enumerate(data["names"].tolist()):
        record: dict[str, Any] = header | {"name": name, "counts": data[f"counts_{i}"].tolist()}
        record |= {key: int(data[key][i]) for key in _INTS}
        record |= {key: float(data[key][i]) for key in _FLOATS}
        records.append(record)
    return records
