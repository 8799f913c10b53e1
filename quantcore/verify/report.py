"""The result of `fixpoint evaluate`: per-layer figures and the model summary, as JSON, CSV and a table.

Infinities in JSON. JSON has no infinity (Python's json would write `Infinity`, which other parsers
reject) and a capped stand-in such as 999 dB would be read as a measurement, so a figure that is not a
finite number is written as null and the object holding it lists it in its "nonfinite" map, from key to
"inf", "-inf" or "nan". An exact layer (metrics.py says when each figure is infinite) reads

    {"name": "conv1", "sqnr_db": null, ..., "nonfinite": {"sqnr_db": "inf", "psnr_db": "inf"}}

Every layer object and the top-level object carry "nonfinite" ({} when all is finite); null with no entry
there means "not measured" (top1_* without labels, psnr_db not computed). EvaluationReport.from_json reads a
report back with the infinities restored.
Top-1 and agreement are fractions (0..1); top1_drop_points is 100 * (top1_float - top1_int8).

Classifiers only. "classifier" (true/false) says whether the model is one (quantcore/verify/metrics.py
states the rule: one output, one vector of K >= 2 class scores per sample). For a model that is not,
top1_float, top1_int8, top1_drop_points and agreement are absent - not null, which would read as "no
labels given": they do not apply - and the table's summary says why. A report written before the key
existed reads back as a classifier when it has an agreement.

In CSV a float is written as Python prints it, so infinities are "inf" / "-inf" (float() and pandas read
those back); an empty cell is "not measured". Both files are written atomically: a temporary file in the
same folder, flushed and fsynced, then os.replace, so a reader never sees half a report.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quantcore.errors import QuantcoreError
from quantcore.verify.metrics import NOT_CLASS_SCORES, TensorMetrics

if TYPE_CHECKING:
    from rich.table import Table

REPORT_VERSION = 1
CSV_COLUMNS = ("name", "op", "sqnr_db", "psnr_db", "cosine", "rel_l2", "max_abs")
_LAYER_FLOATS = ("sqnr_db", "psnr_db", "cosine", "rel_l2", "max_abs")
_HEADERS = ("layer", "op", "SQNR dB", "PSNR dB", "cosine", "rel L2", "max abs", "")
_WORST = "<- worst"
NOT_A_CLASSIFIER = f"top-1, agreement: not measured (not a classifier: {NOT_CLASS_SCORES})"


class ReportError(QuantcoreError):
    """An evaluation report could not be written or read back; names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class LayerMetrics:
    """Float vs int8 figures of one layer's output."""

    name: str
    op: str
    """The operator, as the pipeline names it (e.g. its op enum's name); only displayed."""
    sqnr_db: float
    cosine: float
    rel_l2: float
    max_abs: float
    psnr_db: float | None = None
    """None when not computed."""

    @classmethod
    def from_metrics(cls, name: str, op: str, metrics: TensorMetrics) -> LayerMetrics:
        return cls(
            name, op, metrics.sqnr_db, metrics.cosine, metrics.rel_l2, metrics.max_abs, metrics.psnr_db
        )

    def to_dict(self) -> dict[str, Any]:
        values = {key: getattr(self, key) for key in _LAYER_FLOATS}
        return {"name": self.name, "op": self.op, **_json_numbers(values)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayerMetrics:
        numbers = _restore_numbers(data, _LAYER_FLOATS)
        required = {key: _required(numbers, key) for key in ("sqnr_db", "cosine", "rel_l2", "max_abs")}
        return cls(name=str(data["name"]), op=str(data["op"]), psnr_db=numbers["psnr_db"], **required)


@dataclass(frozen=True)
class EvaluationReport:
    """What `fixpoint evaluate` found for one model and one quant-params file."""

    model: str
    """The float model evaluated (its path as given)."""
    params_file: str
    """The quant-params JSON the int8 network was built from (its path as given)."""
    samples: int
    top1_float: float | None
    """Share of labelled samples the float model gets right; None without labels."""
    top1_int8: float | None
    """Same for the int8 network; None without labels."""
    agreement: float | None
    """Share of samples whose float and int8 arg-max agree; None when the model is not a classifier."""
    output_sqnr_db: float
    """SQNR over all model outputs together."""
    layers: list[LayerMetrics]
    classifier: bool = True
    """Whether the model is a classifier (metrics.classifier_classes); without, no top-1 nor agreement."""

    def __post_init__(self) -> None:
        measured = (self.agreement, self.top1_float, self.top1_int8)
        consistent = self.agreement is not None if self.classifier else measured == (None, None, None)
        if not consistent:
            raise ValueError(
                "a classifier has an arg-max agreement (and top-1 with labels); another model none"
            )

    @property
    def top1_drop_points(self) -> float | None:
        if self.top1_float is None or self.top1_int8 is None:
            return None
        return 100.0 * (self.top1_float - self.top1_int8)

    @property
    def worst_layer(self) -> LayerMetrics | None:
        """The layer with the lowest SQNR (the first of equals); None if there are none or all are exact."""
        index = self._worst_index()
        return None if index is None else self.layers[index]

    def _worst_index(self) -> int | None:
        inexact = [i for i, layer in enumerate(self.layers) if layer.sqnr_db != math.inf]
        return min(inexact, key=lambda i: self.layers[i].sqnr_db) if inexact else None

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst_layer
        summary: dict[str, float | None] = {}
        if self.classifier:
            summary.update(
                top1_float=self.top1_float,
                top1_int8=self.top1_int8,
                top1_drop_points=self.top1_drop_points,
                agreement=self.agreement,
            )
        summary["output_sqnr_db"] = self.output_sqnr_db
        return {
            "version": REPORT_VERSION,
            "model": self.model,
            "params_file": self.params_file,
            "samples": self.samples,
            "classifier": self.classifier,
            **_json_numbers(summary),
            "worst_layer": None if worst is None else worst.name,
            "layers": [layer.to_dict() for layer in self.layers],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json_text(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationReport:
        numbers = _restore_numbers(data, ("top1_float", "top1_int8", "agreement", "output_sqnr_db"))
        classifier = classifier_of(data)
        return cls(
            model=str(data["model"]),
            params_file=str(data["params_file"]),
            samples=int(data["samples"]),
            top1_float=numbers["top1_float"] if classifier else None,
            top1_int8=numbers["top1_int8"] if classifier else None,
            agreement=_required(numbers, "agreement") if classifier else None,
            output_sqnr_db=_required(numbers, "output_sqnr_db"),
            layers=[LayerMetrics.from_dict(layer) for layer in data["layers"]],
            classifier=classifier,
        )

    @classmethod
    def from_json(cls, text: str, *, source: str = "<report>") -> EvaluationReport:
        try:
            return cls.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as err:  # wrong shapes of JSON all end here
            raise ReportError(source, f"not a fixpoint evaluation report ({err!r})") from err

    def write_json(self, path: str | os.PathLike[str]) -> None:
        write_atomically(Path(path), self.to_json())

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """One row per layer, columns CSV_COLUMNS; the model summary is in the JSON and the table."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for layer in self.layers:
            writer.writerow(["" if value is None else value for value in _csv_row(layer)])
        write_atomically(Path(path), buffer.getvalue())

    def format_table(self, *, width: int = 100, plain: bool = False) -> str:
        """The per-layer table and the summary as plain text (no colour codes), for a terminal or a log.

        Drawn with rich when it is installed and plain is False, else with ASCII columns. Layer names
        are never wrapped or cut, so they can be searched for: the table grows past width if it must.
        """
        if not plain:
            try:
                table = self._rich_text(width)
            except ImportError:
                pass
            else:
                return table + "\n".join(self.summary_lines()) + "\n"
        return _plain_table(self._cells()) + "\n" + "\n".join(self.summary_lines()) + "\n"

    def rich_table(self) -> Table:
        """The per-layer table as a rich renderable (the worst layer in red), for a colour terminal."""
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, title=f"{self.model}: float vs int8, per layer")
        for index, header in enumerate(_HEADERS):
            table.add_column(header, justify="left" if index < 2 else "right", no_wrap=True)
        worst = self._worst_index()
        for index, cells in enumerate(self._cells()):
            table.add_row(*cells, style="bold red" if index == worst else None)
        return table

    def summary_lines(self) -> list[str]:
        drop = self.top1_drop_points
        if self.agreement is None:
            classes = [NOT_A_CLASSIFIER]
        elif self.top1_float is None or self.top1_int8 is None or drop is None:
            classes = ["top-1: not measured (no labels given)"]
        else:
            top1 = f"top-1: float {_percent(self.top1_float)}, int8 {_percent(self.top1_int8)}"
            classes = [top1 + f" (drop {drop:.2f} points)"]
        if self.agreement is not None:
            classes.append(f"agreement float/int8: {_percent(self.agreement)}")
        worst = self.worst_layer
        if worst is not None:
            worst_line = f"worst layer: {worst.name} ({worst.op}), SQNR {format_db(worst.sqnr_db)} dB"
        else:
            worst_line = "worst layer: none (every layer exact)" if self.layers else "worst layer: no layers"
        return [
            f"model: {self.model}   params: {self.params_file}   samples: {self.samples}",
            *classes,
            f"output SQNR: {format_db(self.output_sqnr_db)} dB",
            worst_line,
        ]

    def _cells(self) -> list[tuple[str, ...]]:
        worst = self._worst_index()
        return [
            (
                layer.name,
                layer.op,
                format_db(layer.sqnr_db),
                "-" if layer.psnr_db is None else format_db(layer.psnr_db),
                _cosine(layer.cosine),
                f"{layer.rel_l2:.3e}",
                f"{layer.max_abs:.4g}",
                _WORST if index == worst else "",
            )
            for index, layer in enumerate(self.layers)
        ]

    def _rich_text(self, width: int) -> str:
        from rich.console import Console

        table = self.rich_table()
        probe = Console(file=io.StringIO(), width=10_000)
        natural = probe.measure(table).maximum
        console = Console(file=io.StringIO(), record=True, width=max(width, natural), color_system=None)
        console.print(table)
        return "".join(line.rstrip() + "\n" for line in console.export_text(styles=False).splitlines())


def json_text(data: Mapping[str, Any], *, indent: int | None = 2) -> str:
    """A report as the JSON text written and printed. allow_nan=False: a non-finite value that slipped
    past _json_numbers fails here, not in a reader."""
    return json.dumps(data, indent=indent, allow_nan=False) + "\n"


def classifier_of(data: dict[str, Any]) -> bool:
    """An evaluation report's "classifier"; a report written before the key existed was of a classifier
    when it has an agreement (the module docstring)."""
    classifier = data.get("classifier", "agreement" in data)
    if not isinstance(classifier, bool):
        raise TypeError(f"'classifier' must be true or false, not {classifier!r}")
    return classifier


def _json_numbers(values: dict[str, float | None]) -> dict[str, Any]:
    """The values with non-finite floats as null, plus the "nonfinite" map that says what they were."""
    out: dict[str, Any] = {}
    nonfinite: dict[str, str] = {}
    for key, value in values.items():
        if value is not None and not math.isfinite(value):
            nonfinite[key] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            value = None
        out[key] = value
    out["nonfinite"] = nonfinite
    return out


def _restore_numbers(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, float | None]:
    nonfinite = data.get("nonfinite", {})
    out: dict[str, float | None] = {}
    for key in keys:
        value = data.get(key)
        out[key] = float(nonfinite[key]) if key in nonfinite else (None if value is None else float(value))
    return out


def _required(numbers: dict[str, float | None], key: str) -> float:
    value = numbers[key]
    if value is None:
        raise KeyError(f"'{key}' is null but has no 'nonfinite' entry")
    return value


def _csv_row(layer: LayerMetrics) -> list[object]:
    return [getattr(layer, column) for column in CSV_COLUMNS]


def format_db(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else str(value)


def json_db(value: float) -> float | None:
    """A dB figure as the JSON files keep it: 3 decimals, None (null) when it is not finite."""
    return round(value, 3) if math.isfinite(value) else None


def _cosine(value: float) -> str:
    # Truncated, not rounded: 0.9999996 shows as 0.999999, so 1.000000 is only ever an exact cosine of 1.
    return f"{math.floor(value * 1e6) / 1e6:.6f}"


def _percent(fraction: float) -> str:
    return f"{100.0 * fraction:.2f} %"


def _plain_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in [_HEADERS, *rows]) for i in range(len(_HEADERS))]

    def line(cells: tuple[str, ...]) -> str:
        left = (0, 1, len(cells) - 1)  # name, op and the worst marker; the figures align right
        parts = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths).rstrip()
    return "\n".join([line(_HEADERS), rule, *(line(row) for row in rows)]) + "\n"


def write_atomically(path: Path, text: str) -> None:
    # The mode of a file being replaced is kept; a new one gets 0o644 (mkstemp alone would leave 0o600).
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise ReportError(str(path), f"cannot write the report there ({err.strerror or err})") from err
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException as err:
        Path(temp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise ReportError(str(path), f"cannot write the report ({err.strerror or err})") from err
        raise
