"""The dashboard's figures: pure functions from session data to plotly figures (tested without a server).

One function per panel: the trajectory, the roofline, the resource-utilisation gauges, the
memory-access heatmap, and the experiment table's rows. The optimisation landscape lives in
``landscape.py`` and the code diff in ``diff.py``. Text that reaches the page goes through
``scrub`` first: a kernel's intent or a failure reason could quote something credential-shaped.

Per-point columns go to plotly as numpy arrays (:func:`floats`, :func:`texts`): plotly checks a list
element by element, which made most of a 10,000-iteration page's build time, and sends a numeric
array to the browser as packed binary rather than decimal text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from kernel_code.dashboard.data import DeepProfile, IterationRow, SessionData
from openkernel.hardware import Calibration
from openkernel.traces.scrub import scrub

__all__ = [
    "COLOURS",
    "RooflineCeilings",
    "floats",
    "fmt",
    "heatmap_figure",
    "message_figure",
    "roofline_figure",
    "scrubbed",
    "session_ceilings",
    "table_rows",
    "texts",
    "trajectory_figure",
    "utilisation_figure",
]

COLOURS = {"keep": "#2ca02c", "discard": "#ff7f0e", "error": "#d62728", "pending": "#7f7f7f"}
_LAYOUT: dict[str, Any] = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 50, "b": 50}}


def message_figure(title: str, message: str) -> go.Figure:
    """An empty figure that says, in words, why there is nothing to plot."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 16})
    fig.update_layout(title=title, xaxis={"visible": False}, yaxis={"visible": False}, **_LAYOUT)
    return fig


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


# An intent is shown in three figures and the table, and a session repeats them: scrub each text once.
scrubbed = functools.lru_cache(maxsize=1 << 15)(scrub)


def floats(values: Iterable[float | None]) -> np.ndarray:
    """A float column for plotly; ``None`` becomes NaN, which plotly leaves out as it does ``None``."""
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def texts(values: Iterable[str]) -> np.ndarray:
    """A text column (hover texts) for plotly, as an object array: checked as one array, sent as a list."""
    return np.array(list(values), dtype=object)


def _hover(row: IterationRow) -> str:
    return "<br>".join(
        (
            f"iteration {row.iteration}",
            f"intent: {scrubbed(row.intent) or '—'}",
            f"speedup: {fmt(row.speedup, '.3f', 'x')}",
            f"status: {row.status or 'no kernel'} · {row.decision or 'pending'}",
            f"runtime: {fmt(row.runtime_ms, '.4g', ' ms')}",
        )
    )


# ------------------------------------------------------------------------------------- 1 trajectory


def trajectory_figure(data: SessionData) -> go.Figure:
    """Speedup per iteration, coloured by decision, with the best kept speedup so far as a step line."""
    title = f"Optimization trajectory · {scrub(data.header.problem_name)}"
    if not data.rows:
        return message_figure(title, "no iterations yet")
    fig = go.Figure()
    for decision in ("keep", "discard", "error", "pending"):
        rows = [r for r in data.rows if (r.decision or "pending") == decision]
        if not rows:
            continue
        fig.add_trace(
            go.Scatter(
                x=np.array([r.iteration for r in rows]),
                y=floats(r.speedup if r.speedup is not None else 0.0 for r in rows),  # untimed: drawn at 0
                mode="markers",
                name=decision,
                marker={"color": COLOURS[decision], "size": 9, "symbol": "x" if decision == "error" else "circle"},
                hovertext=texts(_hover(r) for r in rows),
                hoverinfo="text",
            )
        )
    best: list[float | None] = []
    so_far: float | None = None
    for row in data.rows:
        if row.decision == "keep" and row.speedup is not None:
            so_far = row.speedup if so_far is None else max(so_far, row.speedup)
        best.append(so_far)
    fig.add_trace(
        go.Scatter(
            x=np.array([r.iteration for r in data.rows]),
            y=floats(best),
            mode="lines",
            line={"shape": "hv", "color": "#1f77b4", "width": 2},
            name="best so far",
            hoverinfo="skip",
        )
    )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#999"}, annotation_text="reference")
    fig.update_layout(title=title, xaxis_title="iteration", yaxis_title="speedup (x)", **_LAYOUT)
    return fig


# --------------------------------------------------------------------------------------- 2 roofline


@dataclass(frozen=True)
class RooflineCeilings:
    """The two ceilings a roofline draws, each saying where it came from."""

    gpu: str
    bandwidth_bytes_per_s: float
    bandwidth_source: str  # "measured" or "datasheet"
    peak_flops_per_s: float
    compute_key: str  # "fp32", "bf16", ...
    peak_flops_source: str


def _last_profile(data: SessionData) -> dict[str, Any] | None:
    return next((r.profile for r in reversed(data.rows) if r.profile is not None), None)


def session_ceilings(data: SessionData, calibration: Calibration | None) -> RooflineCeilings | None:
    """The session GPU's ceilings: a cached calibration's measured rates where it has them, else the result's."""
    profile = _last_profile(data)
    if profile is None:
        return None
    key = str(profile.get("compute_ceiling", "fp32"))
    ceilings = RooflineCeilings(
        gpu=data.header.hardware_label or "?",
        bandwidth_bytes_per_s=float(profile["bandwidth_bytes_per_s"]),
        bandwidth_source=str(profile.get("bandwidth_source", "?")),
        peak_flops_per_s=float(profile["peak_flops_per_s"]),
        compute_key=key,
        peak_flops_source=str(profile.get("peak_flops_source", "?")),
    )
    if calibration is None:
        return ceilings
    measured_peak = calibration.matmul_flops_per_s.get(key)
    return RooflineCeilings(
        gpu=ceilings.gpu,
        bandwidth_bytes_per_s=calibration.copy_bytes_per_s,
        bandwidth_source="measured",
        peak_flops_per_s=measured_peak if measured_peak is not None else ceilings.peak_flops_per_s,
        compute_key=key,
        peak_flops_source="measured" if measured_peak is not None else ceilings.peak_flops_source,
    )


def roofline_figure(data: SessionData, ceilings: RooflineCeilings | None) -> go.Figure:
    """Log-log arithmetic intensity vs achieved FLOP/s: the ceilings, the reference and every timed kernel."""
    title = "Roofline"
    profile = _last_profile(data)
    if profile is None or ceilings is None:
        return message_figure(title, "no evaluated kernel with a roofline yet")
    flops, intensity = profile.get("flops"), profile.get("arithmetic_intensity")
    if not isinstance(flops, int | float) or not isinstance(intensity, int | float) or flops <= 0 or intensity <= 0:
        return message_figure(title, "this problem moves no bytes or does no FLOPs: no roofline to draw")
    ridge = ceilings.peak_flops_per_s / ceilings.bandwidth_bytes_per_s
    lo, hi = min(intensity, ridge) / 100.0, max(intensity, ridge) * 100.0
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[min(ceilings.peak_flops_per_s, ceilings.bandwidth_bytes_per_s * x) for x in xs],
            mode="lines",
            name=(
                f"{ceilings.gpu}: {ceilings.bandwidth_bytes_per_s / 1e12:.3g} TB/s ({ceilings.bandwidth_source}), "
                f"{ceilings.compute_key} {ceilings.peak_flops_per_s / 1e12:.4g} TFLOP/s ({ceilings.peak_flops_source})"
            ),
            line={"color": "#333", "width": 2},
            hoverinfo="skip",
        )
    )
    reference_ms = next((r.reference_runtime_ms for r in data.rows if r.reference_runtime_ms), None)
    if reference_ms:
        fig.add_trace(
            go.Scatter(
                x=[intensity],
                y=[flops / (reference_ms / 1e3)],
                mode="markers",
                name="reference",
                marker={"symbol": "star", "size": 16, "color": "#9467bd"},
                hovertext=[f"reference<br>runtime: {reference_ms:.4g} ms"],
                hoverinfo="text",
            )
        )
    for decision in ("keep", "discard", "error", "pending"):
        rows = [
            r for r in data.rows if (r.decision or "pending") == decision and r.runtime_ms and r.profile is not None
        ]
        if rows:
            fig.add_trace(
                go.Scatter(
                    x=np.full(len(rows), float(intensity)),
                    y=floats(flops / (r.runtime_ms / 1e3) for r in rows if r.runtime_ms),
                    mode="markers",
                    name=f"kernels: {decision}",
                    marker={"color": COLOURS[decision], "size": 9, "opacity": 0.8},
                    hovertext=texts(_hover(r) for r in rows),
                    hoverinfo="text",
                )
            )
    fig.update_layout(
        title=title,
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "achieved FLOP/s"},
        legend={"orientation": "h", "y": -0.25},
        **_LAYOUT,
    )
    return fig


# ----------------------------------------------------------------------------- 3 utilisation gauges

_GAUGES = (  # (label, KernelProfile attribute): percentages, as Nsight Compute's speed-of-light section
    ("achieved occupancy", "achieved_occupancy_pct"),
    ("SM throughput", "sm_throughput_pct"),
    ("DRAM bandwidth", "dram_throughput_pct"),
    ("L1 hit rate", "l1_hit_rate_pct"),
    ("L2 hit rate", "l2_hit_rate_pct"),
)


def utilisation_figure(profile: DeepProfile | None) -> go.Figure:
    """Speed-of-light gauges of the profile's first kernel, or an honest "not profiled"."""
    title = "Resource utilisation"
    if profile is None:
        return message_figure(
            title, "not profiled: run `kernel-code profile --json` and save it as profiles/iter_NNNN.json"
        )
    if not profile.kernels:
        return message_figure(title, f"iteration {profile.iteration}: the profile holds no kernel")
    kernel = profile.kernels[0]
    fig = go.Figure()
    for index, (label, name) in enumerate(_GAUGES):
        value = getattr(kernel, name)
        fig.add_trace(
            go.Indicator(
                mode="gauge+number",
                value=value if value is not None else 0.0,
                number={"suffix": "%" if value is not None else " (n/a)"},
                title={"text": label, "font": {"size": 13}},
                gauge={"axis": {"range": [0, 100]}, "bar": {"color": "#1f77b4" if value is not None else "#ccc"}},
                domain={"row": index // 3, "column": index % 3},
            )
        )
    facts = (
        f"registers/thread: {fmt(kernel.registers_per_thread, 'd')}",
        f"shared/block: {fmt(kernel.shared_bytes_per_block, ',d', ' B')}",
        f"spills: {fmt(kernel.spill_bytes, ',d', ' B')}",
    )
    fig.add_trace(
        go.Indicator(
            mode="number",
            value=kernel.registers_per_thread or 0,
            title={"text": "<br>".join(facts), "font": {"size": 12}},
            number={"suffix": " regs"},
            domain={"row": 1, "column": 2},
        )
    )
    name = scrub(kernel.kernel_name)
    fig.update_layout(
        title=f"Resource utilisation · iteration {profile.iteration} · {name}",
        grid={"rows": 2, "columns": 3, "pattern": "independent", "ygap": 0.35},
        **{**_LAYOUT, "margin": {"l": 40, "r": 40, "t": 90, "b": 30}},
    )
    return fig


# -------------------------------------------------------------------------------- 7 memory heatmap

_HEAT_COLUMNS = (
    ("L2 sectors (global)", "l2_sectors_global"),
    ("ideal sectors", "l2_sectors_global_ideal"),
    ("excessive sectors", "l2_sectors_global_excessive"),
    ("local (spills)", "l2_sectors_local"),
    ("shared wavefronts", "l1_wavefronts_shared"),
    ("stall samples", "stall_samples"),
)


def heatmap_figure(profile: DeepProfile | None) -> go.Figure:
    """Per-source-line memory counters of the profile's first kernel with any, each column scaled to its max."""
    title = "Memory access heatmap"
    if profile is None:
        return message_figure(title, "not profiled: no profiles/iter_NNNN.json for this iteration")
    kernel = next((k for k in profile.kernels if k.source_lines), None)
    if kernel is None:
        return message_figure(title, f"iteration {profile.iteration}: profiled without --source (no per-line counters)")
    lines = kernel.source_lines
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for line in lines:
        z_row: list[float | None] = []
        text_row: list[str] = []
        for label, name in _HEAT_COLUMNS:
            column_max = max((getattr(x, name) or 0 for x in lines), default=0)
            value = getattr(line, name)
            z_row.append(None if value is None else (value / column_max if column_max else 0.0))
            text_row.append(f"line {line.line}: {scrub(line.source.strip())}<br>{label}: {fmt(value, ',d')}")
        z.append(z_row)
        text.append(text_row)
    labels = [f"{line.line}: {scrub(line.source.strip())[:50]}" for line in lines]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[label for label, _ in _HEAT_COLUMNS],
            y=labels,
            text=text,
            hoverinfo="text",
            colorscale="YlOrRd",
            zmin=0,
            zmax=1,
            colorbar={"title": "share of column max"},
        )
    )
    fig.update_layout(
        title=f"{title} · iteration {profile.iteration} · {scrub(kernel.kernel_name)}",
        yaxis={"autorange": "reversed", "automargin": True},
        height=max(350, 24 * len(lines) + 150),
        **_LAYOUT,
    )
    return fig


# ------------------------------------------------------------------------------ 4 experiment table


def table_rows(data: SessionData) -> list[dict[str, Any]]:
    """One dict per iteration for the ag-grid table; numbers stay numbers so that sorting is numeric."""
    out = []
    for r in data.rows:
        out.append(
            {
                "iteration": r.iteration,
                "intent": scrubbed(r.intent),
                "status": r.status or "no kernel",
                "decision": r.decision or "pending",
                "speedup": None if r.speedup is None else round(r.speedup, 4),
                "runtime_ms": None if r.runtime_ms is None else float(f"{r.runtime_ms:.4g}"),
                "bottleneck": (r.profile or {}).get("bottleneck"),
                "pct_of_peak": _pct((r.profile or {}).get("pct_of_peak")),
                "reason": scrubbed(r.reason),
                "best": r.iteration == data.best_iteration,
            }
        )
    return out


def _pct(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return None
    return round(float(value), 1)
