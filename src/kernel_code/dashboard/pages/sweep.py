"""The sweeps pages: ``/sweeps`` lists the sweeps recorded in the session store, ``/sweep/<id>`` shows one.

A sweep's page is built from its record (``openkernel.sweeps.summarise``): fast_p and the geometric
mean on one line, a bar per fast_p threshold, a bar per problem's best speedup (a CPU slot's bar is
grey and marked: not a GPU timing), and a row per problem linking to its session's page. Only sweeps
found in ``<home>/.sweeps`` can be shown: the id in the URL is looked up, never joined to a path.
A running sweep's page redraws itself every few seconds (its record is read again); a finished one
stops asking. Ids are prefixed ``sweep-``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dash
import plotly.graph_objects as go
from dash import dcc, html

from kernel_code.dashboard.figures import COLOURS, message_figure
from openkernel.errors import ConfigError
from openkernel.sweeps import SweepSummary, summarise, sweeps_home
from openkernel.sweeps.record import RECORD_FILE
from openkernel.sweeps.summary import measures_text, speedup_text
from openkernel.traces.scrub import scrub

if TYPE_CHECKING:
    from kernel_code.dashboard.server import SessionRegistry

__all__ = [
    "REFRESH_MS",
    "TABLE_COLUMNS",
    "fast_p_figure",
    "layout",
    "list_layout",
    "register_callbacks",
    "speedup_figure",
    "sweep_paths",
]

TABLE_COLUMNS = ("problem", "status", "best speedup", "iterations", "attempts", "cost", "session", "reason")
_CELL = {"padding": "4px 10px", "textAlign": "left"}
_LAYOUT: dict[str, Any] = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 50, "b": 80}}
REFRESH_MS = 3000  # a running sweep's page reads its record again this often
_UNTIMED = "#bbbbbb"  # a CPU slot's speedup: shown, but not as a GPU timing


def sweep_paths(home: Path) -> dict[str, Path]:
    """Sweep id -> folder, for every sweep recorded under the sessions ``home``, oldest first."""
    folder = sweeps_home(home)
    if not folder.is_dir():
        return {}
    return {p.name: p for p in sorted(folder.iterdir()) if (p / RECORD_FILE).is_file()}


def fast_p_figure(summary: SweepSummary) -> go.Figure:
    """A bar per threshold p: the fraction of problems correct and faster than p (absent: not timed)."""
    title = "fast_p: correct and faster than p× (of every problem)"
    if not summary.rows:
        return message_figure(title, "the sweep has no problems yet")
    labels = [f"fast_{p:g}" for p, _ in summary.fast_p]
    values = [v for _, v in summary.fast_p]
    texts = ["not timed" if v is None else f"{v:.2f}" for v in values]
    bar = go.Bar(x=labels, y=[0.0 if v is None else v for v in values], text=texts, textposition="outside",
                 marker_color=[_UNTIMED if v is None else COLOURS["keep"] for v in values])  # fmt: skip
    fig = go.Figure(bar)
    fig.update_layout(title=title, yaxis={"range": [0, 1.1], "title": "fraction of problems"}, **_LAYOUT)
    return fig


def speedup_figure(summary: SweepSummary) -> go.Figure:
    """A bar per problem: its best kernel's speedup (log scale); grey where it is not a GPU timing."""
    title = "best speedup per problem"
    shown = [r for r in summary.rows if r.outcome is not None and r.outcome.best_speedup is not None]
    if not shown:
        return message_figure(title, "no problem has a correct kernel yet")
    speedups = [r.outcome.best_speedup for r in shown if r.outcome is not None]
    untimed = [r.outcome is not None and not r.outcome.timing_valid for r in shown]
    bar = go.Bar(
        x=[scrub(r.problem) for r in shown],
        y=speedups,
        text=[speedup_text(r.outcome) for r in shown],
        textposition="outside",
        marker_color=[_UNTIMED if u else COLOURS["keep"] for u in untimed],
    )
    fig = go.Figure(bar)
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="the reference")
    note = " · grey, cpu*: not a GPU timing" if any(untimed) else ""
    fig.update_layout(title=title + note, yaxis={"type": "log", "title": "speedup (×)"}, **_LAYOUT)
    return fig


def list_layout(registry: SessionRegistry) -> html.Div:
    rows = []
    for sweep_id, path in reversed(sweep_paths(registry.config.home).items()):
        try:
            summary = summarise(path)
        except ConfigError:
            continue
        done = sum(1 for r in summary.rows if r.status == "finished")
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
        cells = (dcc.Link(sweep_id, href=f"/sweep/{sweep_id}"), f"{done}/{len(summary.rows)} finished",
                 "finished" if summary.complete else "running or stopped", started)  # fmt: skip
        rows.append(html.Tr([html.Td(c, style=_CELL) for c in cells]))
    header = html.Thead(html.Tr([html.Th(c, style=_CELL) for c in ("sweep", "problems", "state", "last change")]))
    empty = html.P(f"no sweeps under {sweeps_home(registry.config.home)}", id="sweeps-empty") if not rows else None
    return html.Div([html.H2("kernel code · sweeps"), html.Table([header, html.Tbody(rows)], id="sweeps-table"),
                     empty], style={"padding": "10px 20px"})  # fmt: skip


def layout(sweep_id: str, registry: SessionRegistry) -> html.Div:
    path = sweep_paths(registry.config.home).get(sweep_id)
    if path is None:
        return html.Div([html.H2("no such sweep"), dcc.Link("all sweeps", href="/sweeps")], id="sweep-missing",
                        style={"padding": "10px 20px"})  # fmt: skip
    children, complete = _body(path, registry)
    return html.Div(
        [
            dcc.Store(id="sweep-id", data=sweep_id),
            dcc.Interval(id="sweep-tick", interval=REFRESH_MS, disabled=complete),
            html.Div(children, id="sweep-body"),
            dcc.Link("all sweeps", href="/sweeps"),
        ],
        style={"padding": "10px 20px"},
    )


def register_callbacks(app: dash.Dash, registry: SessionRegistry) -> None:
    """The running sweep's redraw: the record read again, until the sweep is complete."""

    @app.callback(
        dash.Output("sweep-body", "children"),
        dash.Output("sweep-tick", "disabled"),
        dash.Input("sweep-tick", "n_intervals"),
        dash.State("sweep-id", "data"),
        prevent_initial_call=True,
    )
    def _redraw(_: int | None, sweep_id: str | None) -> tuple[object, bool]:
        path = sweep_paths(registry.config.home).get(str(sweep_id))
        if path is None:
            return [html.H3("the sweep's record is gone")], True
        return _body(path, registry)


def _body(path: Path, registry: SessionRegistry) -> tuple[list[Any], bool]:
    """What the sweep's page shows (title, measures, figures, table), and whether the sweep is complete."""
    summary = summarise(path)
    sessions = registry.paths()
    rows = []
    for r in summary.rows:
        o = r.outcome
        session_id = Path(r.session_dir).name if r.session_dir else None
        link = dcc.Link(session_id, href=f"/session/{session_id}") if session_id in sessions else (session_id or "—")
        cost = "—" if o is None else ("price unknown" if o.cost_usd is None else f"${o.cost_usd:.4f}")
        cells = (scrub(r.problem), r.status, speedup_text(o), "—" if o is None else str(o.iterations),
                 str(r.attempts), cost, link, scrub(r.reason))  # fmt: skip
        rows.append(html.Tr([html.Td(c, style=_CELL) for c in cells]))
    table = html.Table([html.Thead(html.Tr([html.Th(c, style=_CELL) for c in TABLE_COLUMNS])), html.Tbody(rows)],
                       id="sweep-table")  # fmt: skip
    state = "finished" if summary.complete else "running, or stopped (kernel-code sweep --resume continues it)"
    figures = (("sweep-fast-p", fast_p_figure(summary)), ("sweep-speedups", speedup_figure(summary)))
    graphs = [dcc.Graph(id=i, figure=f, config={"displaylogo": False}, style={"height": "420px"}) for i, f in figures]
    children = [
        html.H2(f"kernel code · sweep {summary.sweep_id}"),
        html.P(f"{state} · {measures_text(summary)}", id="sweep-measures"),
        html.Div(graphs, style={"display": "grid", "gridTemplateColumns": "1fr 2fr"}),
        table,
    ]
    return children, summary.complete
