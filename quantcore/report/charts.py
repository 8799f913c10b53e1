"""The report's charts as plain geometry: numbers in, rectangles, lines and labels out.

The template (templates/report/report.html.j2) turns these into inline SVG; nothing here writes markup,
so every string reaches the HTML through jinja2's escaping. Coordinates are SVG user units (px).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

SQNR_GOOD_DB = 30.0
"""At or above: a layer whose int8 output is within ~3% (rel. L2) of the float one."""
SQNR_FAIR_DB = 20.0
"""Below: >10% relative error, the layer worth a look (a wider range, another method, int16)."""


def db_text(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value) and value > 0:
        return "exact"
    return f"{value:.1f}" if math.isfinite(value) else str(value)


def quality(value: float | None) -> str:
    """CSS class of a SQNR: good, fair, poor (or exact / none)."""
    if value is None:
        return "none"
    if math.isinf(value) and value > 0:
        return "exact"
    if value >= SQNR_GOOD_DB:
        return "good"
    return "fair" if value >= SQNR_FAIR_DB else "poor"


def _nice_ceiling(value: float, step: float) -> float:
    return max(step, math.ceil(value / step) * step)


def sqnr_chart(layers: Sequence[Mapping[str, Any]], width: int = 760) -> dict[str, Any]:
    """Horizontal bars, one per layer: the int8 output's SQNR against the float one (evaluation set),
    with a tick for the same figure on the verification inputs when there is one."""
    label_w, value_w, row_h, top = 170, 64, 22, 26
    plot_w = width - label_w - value_w
    finite = [
        v
        for layer in layers
        for v in (layer.get("sqnr_db"), layer.get("verify_sqnr_db"))
        if v is not None and math.isfinite(v)
    ]
    scale_max = _nice_ceiling(max([*finite, SQNR_GOOD_DB]), 10.0)

    def x_of(value: float) -> float:
        return label_w + plot_w * min(max(value, 0.0), scale_max) / scale_max

    rows = []
    for i, layer in enumerate(layers):
        value = layer.get("sqnr_db")
        y = top + i * row_h
        exact = value is not None and math.isinf(value) and value > 0
        bar_end = label_w + plot_w if exact else (x_of(value) if value is not None else label_w)
        verify_value = layer.get("verify_sqnr_db")
        rows.append({
            "name": layer["name"], "op": layer.get("op", ""), "y": y, "text_y": y + row_h * 0.68,
            "bar_x": label_w, "bar_w": round(bar_end - label_w, 2), "bar_h": row_h - 6, "bar_y": y + 3,
            "value": db_text(value), "cls": quality(value), "value_x": label_w + plot_w + 6,
            "marker_x": round(x_of(verify_value), 2) if verify_value is not None else None,
            "marker_text": db_text(verify_value),
        })  # fmt: skip
    height = top + len(layers) * row_h + 28
    ticks = [
        {"x": round(x_of(v), 2), "label": f"{v:g}"}
        for v in _ticks(scale_max, 10.0 if scale_max <= 60 else 20.0)
    ]
    thresholds = [
        {"x": round(x_of(v), 2), "label": f"{v:g} dB", "cls": name}
        for v, name in ((SQNR_FAIR_DB, "fair"), (SQNR_GOOD_DB, "good"))
        if v <= scale_max
    ]
    return {
        "width": width, "height": height, "rows": rows, "ticks": ticks, "thresholds": thresholds,
        "plot_x": label_w, "plot_w": plot_w, "top": top, "bottom": top + len(layers) * row_h,
        "axis_y": top + len(layers) * row_h + 16, "scale_max": scale_max,
        "has_markers": any(r["marker_x"] is not None for r in rows),
    }  # fmt: skip


def _ticks(maximum: float, step: float) -> list[float]:
    count = round(maximum / step)
    return [i * step for i in range(count + 1)]


def extent(entry: Mapping[str, Any]) -> tuple[float, float]:
    """The values an activation's chart spans (histograms.py's bins too): its chosen range and, when
    the document records one, its observed range."""
    spans = [entry["range"]] + ([entry["observed"]] if entry["observed"] else [])
    return min(r["min"] for r in spans), max(r["max"] for r in spans)


def histogram_chart(entry: Mapping[str, Any], width: int = 360, height: int = 150) -> dict[str, Any]:
    """One activation: its value histogram (log counts), the chosen range's thresholds, the clipped
    area shaded, the observed min and max marked (when the document records them: histograms.py)."""
    pad_l, pad_r, pad_t, pad_b = 8, 8, 18, 34
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    hist = entry.get("histogram")
    chosen, observed = entry["range"], entry["observed"]
    if hist:
        edges, counts = hist["edges"], hist["counts"]
        lo, hi = edges[0], edges[-1]
    else:  # no values: the two ranges only
        lo, hi = extent(entry)
        edges, counts = [], []
    span = (hi - lo) or 1.0

    def x_of(value: float) -> float:
        return float(round(pad_l + plot_w * (min(max(value, lo), hi) - lo) / span, 2))

    base = pad_t + plot_h
    peak = math.log10(1 + max(counts)) if counts and max(counts) > 0 else 1.0
    bars = []
    for i, count in enumerate(counts):
        if count <= 0:
            continue
        h = max(1.0, plot_h * math.log10(1 + count) / peak)
        x0, x1 = x_of(edges[i]), x_of(edges[i + 1])
        clipped = edges[i + 1] <= chosen["min"] or edges[i] >= chosen["max"]
        bars.append({
            "x": x0, "w": round(max(x1 - x0 - 0.4, 0.6), 2), "y": round(base - h, 2), "h": round(h, 2),
            "cls": "clipped" if clipped else "kept",
            "title": f"[{edges[i]:.4g}, {edges[i + 1]:.4g}): {count}",
        })  # fmt: skip
    shaded = []
    if chosen["min"] > lo:
        shaded.append({"x": pad_l, "w": round(x_of(chosen["min"]) - pad_l, 2)})
    if chosen["max"] < hi:
        shaded.append({"x": x_of(chosen["max"]), "w": round(pad_l + plot_w - x_of(chosen["max"]), 2)})
    values = hist["values"] if hist else 0
    clipped_n = (hist["clipped_low"] + hist["clipped_high"]) if hist else 0
    return {
        "width": width, "height": height, "bars": bars, "shaded": shaded,
        "plot_x": pad_l, "plot_y": pad_t, "plot_w": plot_w, "plot_h": plot_h, "base": base,
        "thresholds": [
            {"x": x_of(chosen["min"]), "label": f"{chosen['min']:.4g}", "anchor": "start"},
            {"x": x_of(chosen["max"]), "label": f"{chosen['max']:.4g}", "anchor": "end"},
        ],
        "observed": [x_of(observed["min"]), x_of(observed["max"])] if observed else [],
        "zero_x": x_of(0.0) if lo < 0.0 < hi else None,
        "axis": [{"x": x_of(lo), "label": f"{lo:.3g}", "anchor": "start"},
                 {"x": x_of(hi), "label": f"{hi:.3g}", "anchor": "end"}],
        "label_y": base + 14, "axis_y": base + 28,
        "has_values": bool(hist),
        "clipped_text": _share(clipped_n, values) if hist else "no histogram (give --calib)",
    }  # fmt: skip


def _share(count: int, total: int) -> str:
    if total == 0:
        return "no values"
    if count == 0:
        return "nothing clipped"
    return f"{100.0 * count / total:.3g}% of {total:,} values clipped"


def memory_bars(summary: Mapping[str, Any], width: int = 760) -> dict[str, Any] | None:
    """Flash and RAM used against their budgets; RAM split into the arena, scratch and the rest."""
    flash, ram = summary.get("flash_bytes"), summary.get("ram_bytes")
    if flash is None and ram is None:
        return None
    label_w, bar_h, gap, top = 70, 26, 18, 8
    plot_w = width - label_w - 10
    rows = []
    bars: list[tuple[str, Any, Any, list[tuple[str, Any, str]]]] = [
        ("flash", flash, summary.get("flash_budget"), [("code + constants", flash, "flash")]),
        ("RAM", ram, summary.get("ram_budget"), _ram_parts(summary)),
    ]
    for i, (name, used, budget, parts) in enumerate(bars):
        if used is None:
            continue
        full = max(budget or used, used, 1)
        y = top + i * (bar_h + gap + 16)
        x = float(label_w)
        segments = []
        for label, size, cls in parts:
            w = plot_w * size / full
            segments.append({"x": round(x, 2), "w": round(w, 2), "cls": cls, "title": f"{label}: {size:,} B"})
            x += w
        percent = f" ({100.0 * used / budget:.1f}% of {budget:,} B)" if budget else ""
        rows.append({
            "name": name, "y": y, "bar_h": bar_h, "segments": segments, "text_y": y + bar_h * 0.65,
            "caption": f"{used:,} B used{percent}", "caption_y": y + bar_h + 13,
            "over": bool(budget and used > budget),
            "budget_x": round(label_w + plot_w * min(budget or full, full) / full, 2),
        })  # fmt: skip
    height = top + len(rows) * (bar_h + gap + 16)
    return {"width": width, "height": height, "rows": rows, "plot_x": label_w, "plot_w": plot_w}


def _ram_parts(summary: Mapping[str, Any]) -> list[tuple[str, int, str]]:
    ram = int(summary.get("ram_bytes") or 0)
    arena = int(summary.get("arena_bytes") or 0)
    scratch = int(summary.get("scratch_bytes") or 0)
    rest = max(ram - arena - scratch, 0)
    parts = [("activation arena", arena, "arena"), ("CMSIS-NN scratch", scratch, "scratch")]
    return [p for p in parts if p[1] > 0] + [("other data + bss (stack excluded)", rest, "other")]
