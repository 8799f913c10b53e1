"""The report as one self-contained HTML file: inline CSS and SVG, no script, no network.

Rendered from templates/report/report.html.j2 with the project's jinja2 environment (StrictUndefined:
a missing value is an error, never an empty cell) plus HTML autoescaping, since layer and file names
are user text. The charts' geometry comes from quantcore.report.charts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from quantcore.report import charts
from quantcore.templating import environment, write_text

TEMPLATE = "report/report.html.j2"


def _percent(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100.0 * value:.{digits}f} %"


def _number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "exact" if value > 0 else str(value)
    return f"{value:.{digits}g}"


def _bytes(value: int | None) -> str:
    return "-" if value is None else f"{int(value):,} B"


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = environment().overlay(autoescape=True, finalize=None)  # HTML: autoescape, not the C check
    # A dict of its own: the overlay otherwise shares (and would add to) the C templates' filters.
    env.filters = {
        **environment().filters,
        "percent": _percent,
        "number": _number,
        "db": charts.db_text,
        "bytes": _bytes,
        "quality": charts.quality,
    }
    return env


def render(data: Mapping[str, Any]) -> str:
    """The HTML text of the report for merged data (quantcore.report.data.merge)."""
    summary = data["summary"]
    context = {
        "data": data,
        "summary": summary,
        "layers": data["layers"],
        "sqnr": charts.sqnr_chart(data["layers"]) if data["layers"] else None,
        "histograms": [(entry, charts.histogram_chart(entry)) for entry in data["activations"]],
        "memory": charts.memory_bars(summary),
        "mismatched_layers": [layer for layer in data["layers"] if layer.get("mismatched_bytes")],
        "verified": any(layer.get("bytes") is not None for layer in data["layers"]),
        "thresholds": {"good": charts.SQNR_GOOD_DB, "fair": charts.SQNR_FAIR_DB},
    }
    return _environment().get_template(TEMPLATE).render(**context)


def write(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Render and write atomically (unchanged content is not rewritten)."""
    return write_text(Path(path), render(data))
