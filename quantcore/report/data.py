"""The report's data: the evaluation and verification reports read back, merged layer by layer.

`read_evaluation` and `read_verify` read the JSON that `fixpoint evaluate --report-json` and
`fixpoint verify|flash-verify --json` write; `merge` joins them (and the activation histograms) into the
one dict the HTML is rendered from and `fixpoint report --json` prints:

    {"format": "fixpoint-report", "version": 1, "generator", "title", "sources": {evaluation, verify, ...},
     "summary": {classifier, top1_float, top1_int8, top1_drop_points, agreement, output_sqnr_db, worst_layer,
                 verdict ("pass" | "fail" | "error" | "not run"), target, cases, checked_bytes,
                 mismatched_bytes_total, flash_bytes, flash_budget, ram_bytes, ram_budget, arena_bytes,
                 scratch_bytes},
     "layers": [{index, name, op, sqnr_db, cosine, rel_l2, max_abs, bytes, mismatched_bytes,
                 first_mismatch, verify_sqnr_db}],
     "activations": [quantcore.report.histograms entries],
     "evaluation": <the evaluation report as read>, "verify": <the verification report as read>}

Figures that are not finite (the SQNR of an exact layer) follow the evaluation report's rule: null, and
the object's "nonfinite" map says what they were ({"sqnr_db": "inf"}). In Python they are floats.
"classifier" is the evaluation's (null without one): false for a model whose top-1 and agreement do
not apply (quantcore/verify/report.py), whose four figures are then null here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import quantcore
from quantcore.errors import InputError
from quantcore.verify.report import EvaluationReport, ReportError, classifier_of, json_text

FORMAT = "fixpoint-report"
VERSION = 1
_VERIFY_KEYS = ("target", "verdict", "layers")


class ReportInputError(InputError):
    """An input of `fixpoint report` that is missing or is not what it should be; names the file."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}")


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ReportInputError(path, f"does not exist (the {what})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(path, f"cannot read the {what} ({exc})") from exc
    except ValueError as exc:
        raise ReportInputError(path, f"is not JSON ({exc}); expected the {what}") from exc


def read_evaluation(path: str | Path) -> dict[str, Any]:
    """The evaluation report (`fixpoint evaluate --report-json`), checked by reading it back."""
    path = Path(path)
    data = _read_json(path, "evaluation report of `fixpoint evaluate --report-json`")
    try:
        EvaluationReport.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, ReportError) as exc:
        raise ReportInputError(path, f"not a fixpoint evaluation report ({exc!r})") from exc
    return dict(data)


def read_verify(path: str | Path) -> dict[str, Any]:
    """The verification report (`fixpoint verify --json` / `flash-verify --json`, one JSON object)."""
    path = Path(path)
    data = _read_json(path, "verification report of `fixpoint flash-verify --json`")
    if not isinstance(data, dict) or "verdict" not in data:
        raise ReportInputError(path, "not a fixpoint verification report (no 'verdict')")
    if data["verdict"] in ("error", "bad-input"):
        return dict(data)  # the run failed before comparing: its error is the report
    missing = [key for key in _VERIFY_KEYS if key not in data]
    if missing or not isinstance(data["layers"], list):
        raise ReportInputError(path, f"not a fixpoint verification report (missing {', '.join(missing)})")
    return dict(data)


def restore(value: Mapping[str, Any], key: str) -> float | None:
    """value[key] as a float, with the "nonfinite" map's infinities and NaNs put back."""
    nonfinite = value.get("nonfinite") or {}
    if key in nonfinite:
        return float(nonfinite[key])
    raw = value.get(key)
    return None if raw is None else float(raw)


def merge(
    evaluation: Mapping[str, Any] | None,
    verify: Mapping[str, Any] | None,
    activations: list[dict[str, Any]] | None = None,
    sources: Mapping[str, str | None] | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """The report's data (see the module docstring); floats may be infinite here, see `to_json`."""
    layers = _layers(evaluation, verify)
    summary = _summary(evaluation, verify, layers)
    model = str((evaluation or {}).get("model") or "")
    return {
        "format": FORMAT,
        "version": VERSION,
        "generator": f"fixpoint {quantcore.__version__}",
        "title": title or (f"{model}: float to verified int8" if model else "Fixpoint report"),
        "sources": {k: v for k, v in (sources or {}).items() if v},
        "summary": summary,
        "layers": layers,
        "activations": list(activations or []),
        "evaluation": dict(evaluation) if evaluation is not None else None,
        "verify": dict(verify) if verify is not None else None,
    }


def _layers(evaluation: Mapping[str, Any] | None, verify: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every layer of either report, in the firmware's order (the verification runs every layer the
    generated code has, reshapes included); a layer only the evaluation has follows its predecessor."""
    blank = {"op": "", "sqnr_db": None, "cosine": None, "rel_l2": None, "max_abs": None}
    blank.update(bytes=None, mismatched_bytes=None, first_mismatch=None, verify_sqnr_db=None)
    rows: dict[str, dict[str, Any]] = {}
    for layer in (verify or {}).get("layers", []) or []:
        name = str(layer["name"])
        rows[name] = {
            "name": name, **blank, "bytes": int(layer["bytes"]),
            "mismatched_bytes": int(layer["mismatched_bytes"]), "first_mismatch": layer.get("first_mismatch"),
            "verify_sqnr_db": restore(layer, "float_sqnr_db"),
        }  # fmt: skip
    order = list(rows)
    previous: str | None = None
    for layer in (evaluation or {}).get("layers", []):
        name = str(layer["name"])
        if name not in rows:
            rows[name] = {"name": name, **blank}
            order.insert(order.index(previous) + 1 if previous in order else len(order), name)
        rows[name].update(
            op=str(layer.get("op", "")),
            **{key: restore(layer, key) for key in ("sqnr_db", "cosine", "rel_l2", "max_abs")},
        )
        previous = name
    return [{"index": index, **rows[name]} for index, name in enumerate(order)]


def _summary(
    evaluation: Mapping[str, Any] | None, verify: Mapping[str, Any] | None, layers: list[dict[str, Any]]
) -> dict[str, Any]:
    ev = evaluation or {}
    finite = [layer for layer in layers if layer["sqnr_db"] is not None and math.isfinite(layer["sqnr_db"])]
    worst = min(finite, key=lambda layer: layer["sqnr_db"]) if finite else None
    summary: dict[str, Any] = {
        "model": ev.get("model"),
        "params_file": ev.get("params_file"),
        "samples": ev.get("samples"),
        "classifier": classifier_of(dict(ev)) if evaluation is not None else None,
        **{key: restore(ev, key) for key in ("top1_float", "top1_int8", "top1_drop_points", "agreement")},
        "output_sqnr_db": restore(ev, "output_sqnr_db"),
        "worst_layer": worst["name"] if worst else None,
        "worst_sqnr_db": worst["sqnr_db"] if worst else None,
        "verdict": "not run",
        "target": None,
        "cases": None,
        "inputs": None,
        "error": None,
        "checked_bytes": None,
        "mismatched_bytes_total": None,
    }
    memory_keys = ("flash_bytes", "flash_budget", "ram_bytes", "ram_budget", "arena_bytes", "scratch_bytes")
    summary.update(dict.fromkeys(memory_keys))
    if verify is not None:
        summary.update(
            verdict=str(verify.get("verdict")),
            target=verify.get("target"),
            cases=verify.get("cases"),
            inputs=verify.get("inputs"),
            error=verify.get("error"),
            mismatched_bytes_total=verify.get("mismatched_bytes_total"),
            checked_bytes=sum(int(layer.get("bytes", 0)) for layer in verify.get("layers") or []) or None,
            **{key: verify.get(key) for key in memory_keys},
        )
    return summary


def to_json(data: Mapping[str, Any]) -> str:
    """The merged data as JSON: non-finite floats as null, named in their object's "nonfinite" map."""
    return json_text(_finite(data))


def _finite(value: Any) -> Any:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        nonfinite = dict(value.get("nonfinite") or {})
        for key, item in value.items():
            if key == "nonfinite":
                continue
            if isinstance(item, float) and not math.isfinite(item):
                nonfinite[key] = "nan" if math.isnan(item) else ("inf" if item > 0 else "-inf")
                item = None
            out[key] = _finite(item)
        if nonfinite or "nonfinite" in value:
            out["nonfinite"] = nonfinite
        return out
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
