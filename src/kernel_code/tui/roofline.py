"""A log-log roofline drawn in the terminal with braille dots: ceilings as lines, kernels as points.

Pure: data in, a rich ``Text`` out, so that tests read the plot as text. Each terminal cell holds a
2x4 grid of braille dots (U+2800 + a bit per dot), which gives the roof lines four times the
vertical resolution of characters; points are whole characters drawn over the dots, each with a
marker that the legend below the plot names (so no point is told apart by colour alone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

from kernel_code.tui.state import SessionModel
from kernel_code.tui.text import DECISION_STYLE, NOT_GPU
from openkernel.hardware import ceilings, find_spec, spec_by_name

__all__ = ["Roof", "RoofPoint", "plot_roofline", "rate_text", "roofline_view"]

_GUTTER = 8  # characters left of the plot for the y labels
# Bit of each dot in a braille cell, by (column 0-1, row 0-3): the Unicode braille pattern layout.
_DOT_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
_ROOF_STYLE = "cyan"


@dataclass(frozen=True)
class Roof:
    """The ceilings: one bandwidth and one or more compute rates (the problem's own first)."""

    bandwidth_bytes_per_s: float
    compute: tuple[tuple[str, float], ...]  # (label such as "fp32", FLOP/s)


@dataclass(frozen=True)
class RoofPoint:
    label: str  # "reference", "#3"
    intensity: float  # FLOP per byte
    flops_per_s: float
    marker: str  # one character: "R", "●", "★"
    style: str


def rate_text(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _decades(lo: float, hi: float) -> tuple[float, float]:
    return 10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi))


def plot_roofline(roof: Roof, points: list[RoofPoint], width: int, height: int, legend_rows: int = 8) -> Text:
    """The roofline in ``width`` x ``height`` cells (plot and axes; the legend comes below)."""
    cols, rows = max(10, width - _GUTTER), max(4, height - 1)
    ridges = [peak / roof.bandwidth_bytes_per_s for _, peak in roof.compute]
    xs = [p.intensity for p in points if p.intensity > 0] + ridges
    x_lo, x_hi = _decades(min(xs) / 10, max(xs) * 10)
    ys = [p.flops_per_s for p in points if p.flops_per_s > 0] + [roof.bandwidth_bytes_per_s * x_lo]
    y_lo, y_hi = _decades(min(ys) / 2, max(peak for _, peak in roof.compute) * 1.5)

    def col_of(x: float) -> float:  # in dots, 0 .. 2*cols-1
        return (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (2 * cols - 1)

    def row_of(y: float) -> float:  # in dots from the top, 0 .. 4*rows-1
        frac = (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))
        return (1.0 - frac) * (4 * rows - 1)

    bits = [[0] * cols for _ in range(rows)]

    def dot(dx: int, dy: int) -> None:
        if 0 <= dx < 2 * cols and 0 <= dy < 4 * rows:
            bits[dy // 4][dx // 2] |= _DOT_BITS[dx % 2][dy % 4]

    for _, peak in roof.compute:
        last: int | None = None
        for dx in range(2 * cols):
            x = 10 ** (math.log10(x_lo) + dx / (2 * cols - 1) * (math.log10(x_hi) - math.log10(x_lo)))
            dy = round(row_of(min(roof.bandwidth_bytes_per_s * x, peak)))
            for fill in range(min(dy, last if last is not None else dy), max(dy, last if last is not None else dy) + 1):
                dot(dx, fill)
            last = dy
    cells: list[list[tuple[str, str]]] = [[(chr(0x2800 + b) if b else " ", _ROOF_STYLE) for b in row] for row in bits]
    for point in points:  # later points (the best last) are drawn over earlier ones
        cx, cy = round(col_of(point.intensity)) // 2, round(row_of(point.flops_per_s)) // 4
        if 0 <= cx < cols and 0 <= cy < rows:
            cells[cy][cx] = (point.marker, point.style)
    out = Text()
    label_rows = {round(row_of(10**e)) // 4: 10**e for e in range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1)}
    for r, row in enumerate(cells):
        label = rate_text(label_rows[r], "") if r in label_rows else ""
        out.append(f"{label:>{_GUTTER - 2}} ┤" if label else " " * (_GUTTER - 1) + "│", style="dim")
        for char, style in row:
            out.append(char, style=style if char != " " else "")
        out.append("\n")
    axis = [" "] * cols
    for e in range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1):
        tick = f"{10**e:g}"
        at = round(col_of(10**e)) // 2
        if at >= 0 and at + len(tick) <= cols and all(c == " " for c in axis[max(0, at - 1) : at + len(tick)]):
            axis[at : at + len(tick)] = list(tick)
    out.append(" " * (_GUTTER - 1) + "└" + "".join(axis) + "\n", style="dim")
    out.append(" " * _GUTTER + "arithmetic intensity (FLOP/byte, log) →   FLOP/s (log) ↑\n", style="dim")
    out.append(f"  ⣀⡠⠊ memory {rate_text(roof.bandwidth_bytes_per_s, 'B/s')}", style=_ROOF_STYLE)
    for label, peak in roof.compute:
        out.append(f" · {label} {rate_text(peak, 'FLOP/s')}", style=_ROOF_STYLE)
    out.append("\n")
    shown = points[-legend_rows:]
    if len(points) > len(shown):
        out.append(f"  … {len(points) - len(shown)} earlier points not listed\n", style="dim")
    for point in shown:
        out.append(f"  {point.marker} ", style=point.style)
        out.append(f"{point.label}: {rate_text(point.flops_per_s, 'FLOP/s')} at {point.intensity:.3g} FLOP/byte\n")
    return out


def roofline_view(model: SessionModel, width: int, height: int) -> Text:
    """The session's roofline: its kernels against the ceilings of the problem's latest profile.

    Without an evaluated profile the target GPU's datasheet ceilings are drawn alone. Kernels timed
    off the GPU are not placed: a CPU time against a GPU's roof would say nothing.
    """
    p = model.profile
    note = Text()
    points: list[RoofPoint] = []
    if p is not None and p.peak_flops_per_s and p.bandwidth_bytes_per_s and p.arithmetic_intensity:
        roof = Roof(p.bandwidth_bytes_per_s, ((p.compute_ceiling or "compute", p.peak_flops_per_s),))
        reference = next(
            (v.reference_flops_per_s for v in reversed(model.iterations.values()) if v.reference_flops_per_s),
            None,
        )
        if reference:
            points.append(RoofPoint("reference (PyTorch)", p.arithmetic_intensity, reference, "R", "bold blue"))
        best = model.best_iteration
        timed = [v for v in model.iterations.values() if v.achieved_flops_per_s]
        for v in sorted(timed, key=lambda v: v.iteration == best):  # the best is drawn last, on top
            marker, style = ("★", "bold magenta") if v.iteration == best else ("●", DECISION_STYLE[v.decision])
            label = f"#{v.iteration} {v.decision or 'running'}" + (" (best)" if v.iteration == best else "")
            points.append(RoofPoint(label, p.arithmetic_intensity, v.achieved_flops_per_s or 0.0, marker, style))
        if not timed:
            gpu = model.hardware_label or "GPU"
            note.append(f"⚠ {NOT_GPU}: no kernel is placed on the {gpu} roofline\n", "bold yellow")
    else:
        spec = find_spec(model.hardware_label or "") or spec_by_name("H200")
        c = ceilings(spec, None)
        roof = Roof(c.bandwidth_bytes_per_s, tuple((x.key, x.flops_per_s) for x in c.compute))
        if p is not None:  # a profile without a finite intensity (no bytes move)
            why = "this problem moves no bytes: it has no place on a roofline"
        elif any(v.status is not None for v in model.iterations.values()):
            why = "the evaluations carry no roofline"
        else:
            why = "no kernel evaluated yet"
        note.append(f"{why}: {spec.name} datasheet ceilings\n", "dim")
    subject = model.problem or "the problem"
    head = Text(f"{subject} on {model.hardware_label or 'the target GPU'}\n", style="bold")
    return head + note + plot_roofline(roof, points, width, height)
