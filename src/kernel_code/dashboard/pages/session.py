"""One session's page: the seven panels, refreshed by polling the incremental reader.

A ``dcc.Interval`` asks every ``poll_ms`` for the session's data; when the reader folded nothing
new the callback sends nothing (``PreventUpdate``), so an idle page costs a file ``stat`` and a read
of zero bytes. Ids are prefixed ``session-``. The deep-profile panels (utilisation, heatmap) read
``profiles/iter_NNNN.json`` when asked, never on the poll.

The t-SNE map is the one slow figure (a third of a second for 200 kernels, more than every other
panel of a 10,000-iteration session together): it has its own callback, fired by the refresh's new
``session-version``, so the page shows every other panel first and "computing t-SNE…" meanwhile.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dash
import dash_ag_grid as dag
from dash import dcc, html
from dash.exceptions import PreventUpdate

from kernel_code.dashboard import figures
from kernel_code.dashboard.data import DeepProfile, SessionData, load_deep_profile, profiled_iterations
from kernel_code.dashboard.diff import diff_rows, highlight
from kernel_code.dashboard.landscape import TSNE_MAX_POINTS, landscape_3d_figure, tsne_figure
from openkernel.errors import StoreError
from openkernel.traces.scrub import scrub

if TYPE_CHECKING:
    from kernel_code.dashboard.server import SessionRegistry

__all__ = ["TABLE_COLUMNS", "TSNE_PENDING", "layout", "register_callbacks"]

TABLE_COLUMNS = (
    "iteration",
    "intent",
    "status",
    "decision",
    "speedup",
    "runtime_ms",
    "bottleneck",
    "pct_of_peak",
    "reason",
)
_DIFF_BG = {"same": None, "changed": "#fff5b1", "removed": "#ffdce0", "added": "#dcffe4"}
_PANEL = {"border": "1px solid #ddd", "borderRadius": "6px", "padding": "8px", "margin": "8px 0"}
_MONO = {"fontFamily": "monospace", "fontSize": "12px", "whiteSpace": "pre"}
TSNE_PENDING = "computing t-SNE of the latest kernels…"  # the t-SNE panel until its callback answers


def _graph(panel_id: str, figure: Any = None) -> dcc.Graph:
    shown = {} if figure is None else {"figure": figure}
    return dcc.Graph(id=panel_id, config={"displaylogo": False}, style={"height": "460px"}, **shown)


def layout(session_id: str, registry: SessionRegistry) -> html.Div:
    data = registry.snapshot(session_id)
    if data is None:
        return html.Div(
            [html.H3(f"no session {session_id!r} here"), dcc.Link("all sessions", href="/")], id="session-missing"
        )
    return _page(session_id, profiled_iterations(data.path), registry.config.poll_ms)


def _page(session_id: str, profiled: tuple[int, ...], poll_ms: int) -> html.Div:
    columns: list[dict[str, Any]] = [{"field": c, "filter": True, "sortable": True} for c in TABLE_COLUMNS]
    columns[0]["filter"] = "agNumberColumnFilter"
    return html.Div(
        [
            dcc.Store(id="session-id", data=session_id),
            dcc.Store(id="session-version", data=-1),
            dcc.Interval(id="session-interval", interval=poll_ms),
            html.Div([dcc.Link("← all sessions", href="/"), html.H2(id="session-title")]),
            html.Div(id="session-summary", style={"color": "#444"}),
            html.Div(_graph("session-trajectory"), style=_PANEL, id="panel-trajectory"),
            html.Div(_graph("session-roofline"), style=_PANEL, id="panel-roofline"),
            html.Div(
                [
                    dcc.Dropdown(
                        id="session-profile-pick",
                        options=[{"label": f"iteration {i}", "value": i} for i in profiled],
                        value=profiled[-1] if profiled else None,
                        placeholder="no deep profile in profiles/",
                        style={"width": "320px"},
                    ),
                    _graph("session-utilisation"),
                ],
                style=_PANEL,
                id="panel-utilisation",
            ),
            html.Div(
                [
                    dcc.Input(id="session-search", type="search", placeholder="search the table", debounce=False),
                    dag.AgGrid(
                        id="session-table",
                        columnDefs=columns,
                        rowData=[],
                        defaultColDef={"resizable": True, "floatingFilter": True},
                        dashGridOptions={"animateRows": False},
                        getRowId="params.data.iteration",
                        style={"height": "420px"},
                    ),
                ],
                style=_PANEL,
                id="panel-table",
            ),
            html.Div(
                [
                    html.H4("Code diff"),
                    html.Div(
                        [
                            dcc.Dropdown(id="session-diff-a", placeholder="left kernel", style={"width": "300px"}),
                            dcc.Dropdown(id="session-diff-b", placeholder="right kernel", style={"width": "300px"}),
                        ],
                        style={"display": "flex", "gap": "12px"},
                    ),
                    html.Div(id="session-diff", style={"overflowX": "auto", "maxHeight": "600px"}),
                ],
                style=_PANEL,
                id="panel-diff",
            ),
            html.Div(
                [
                    _graph("session-landscape-3d"),
                    _graph("session-tsne", figures.message_figure("Optimisation landscape (t-SNE)", TSNE_PENDING)),
                ],
                style={**_PANEL, "display": "grid", "gridTemplateColumns": "1fr 1fr"},
                id="panel-landscape",
            ),
            html.Div(
                [
                    html.Button("show memory heatmap", id="session-heatmap-load"),
                    html.Div(id="session-heatmap"),
                ],
                style=_PANEL,
                id="panel-heatmap",
            ),
        ],
        style={"padding": "10px 20px"},
    )


def _summary(data: SessionData) -> str:
    h = data.header
    best = next((r.speedup for r in data.rows if r.iteration == data.best_iteration), None)
    decided = sum(r.decision is not None for r in data.rows)
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.started_at_unix_s)) if h.started_at_unix_s else "—"
    parts = (
        f"GPU {h.hardware_label or '—'}",
        f"backend {h.backend or '—'}",
        f"model {scrub(h.model or '—')}",
        f"{decided} iterations",
        "best " + ("—" if best is None else f"{best:.3f}x (iteration {data.best_iteration})"),
        f"started {started}",
        "finished" if data.finished else "running or stopped",
    )
    return " · ".join(parts)


def _kernel_options(data: SessionData) -> list[dict[str, Any]]:
    return [
        {
            "label": f"{r.iteration}: {figures.fmt(r.speedup, '.3f', 'x')} · {figures.scrubbed(r.intent)[:40]}",
            "value": r.iteration,
        }
        for r in data.rows
        if r.kernel_file is not None
    ]


def _read_kernel(data: SessionData, iteration: int) -> str | None:
    """The kernel file of ``iteration``, only from inside the session directory."""
    row = next((r for r in data.rows if r.iteration == iteration), None)
    if row is None or row.kernel_file is None:
        return None
    root = data.path.resolve()
    path = (root / row.kernel_file).resolve()
    if not path.is_relative_to(root):
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class _TsneCache:
    """t-SNE is the slow figure: recomputed only when the set of timed kernels (per session) changed."""

    def __init__(self) -> None:
        self._by_session: dict[Path, tuple[tuple[int, ...], Any]] = {}

    def figure(self, data: SessionData) -> Any:
        timed = [r for r in data.rows if r.runtime_ms is not None and r.speedup is not None]
        key = tuple(r.iteration for r in timed[-TSNE_MAX_POINTS:])
        cached = self._by_session.get(data.path)
        if cached is not None and cached[0] == key:
            return cached[1]
        sources = {i: s for i in key if (s := _read_kernel(data, i)) is not None}
        fig = tsne_figure(data, sources)
        self._by_session[data.path] = (key, fig)
        return fig


def _diff_table(data: SessionData, a: int, b: int) -> html.Div:
    left, right = _read_kernel(data, a), _read_kernel(data, b)
    if left is None or right is None:
        return html.Div("one of these kernels' files is missing from the session directory")
    language = "cuda" if str(next(r.kernel_file for r in data.rows if r.iteration == a)).endswith(".cu") else "python"
    by_iteration = {r.iteration: r for r in data.rows}

    def numbers(i: int) -> str:
        r = by_iteration[i]
        speed, runtime = figures.fmt(r.speedup, ".3f", "x"), figures.fmt(r.runtime_ms, ".4g", " ms")
        return f"iteration {i} · {r.status or '—'} · {r.decision or 'pending'} · {speed} · {runtime}"

    def code(text: str) -> list[Any]:
        return [html.Span(t, style={"color": c} if c else None) for t, c in highlight(text, language)]

    cell = {**_MONO, "padding": "0 6px", "verticalAlign": "top"}
    number = {**cell, "color": "#999", "textAlign": "right"}
    rows = [
        html.Tr(
            [
                html.Td(row.left_no or "", style=number),
                html.Td(code(row.left), style={**cell, "background": _DIFF_BG[row.kind] if row.left_no else "#f6f8fa"}),
                html.Td(row.right_no or "", style=number),
                html.Td(
                    code(row.right), style={**cell, "background": _DIFF_BG[row.kind] if row.right_no else "#f6f8fa"}
                ),
            ],
            className=f"diff-{row.kind}",
        )
        for row in diff_rows(left, right)
    ]
    heading = html.Tr([html.Th(numbers(a), colSpan=2), html.Th(numbers(b), colSpan=2)])
    return html.Div(html.Table([html.Thead(heading), html.Tbody(rows)], style={"borderCollapse": "collapse"}))


def _profile(data: SessionData | None, iteration: int | None) -> tuple[DeepProfile | None, str | None]:
    if data is None or iteration is None:
        return None, None
    try:
        return load_deep_profile(data.path, iteration), None
    except StoreError as err:
        return None, str(err)


def register_callbacks(app: dash.Dash, registry: SessionRegistry) -> None:
    """The page's callbacks; and the page built once, unseen, at server start.

    Dash's first construction of these components costs a quarter of a second (its prop type checks
    fill Python's ABC caches): paid here rather than by the first visitor.
    """
    _page("warm-up", (), registry.config.poll_ms)
    tsne = _TsneCache()
    out = dash.Output

    @app.callback(
        out("session-title", "children"),
        out("session-summary", "children"),
        out("session-trajectory", "figure"),
        out("session-roofline", "figure"),
        out("session-table", "rowData"),
        out("session-diff-a", "options"),
        out("session-diff-b", "options"),
        out("session-landscape-3d", "figure"),
        out("session-version", "data"),
        dash.Input("session-interval", "n_intervals"),
        dash.State("session-id", "data"),
        dash.State("session-version", "data"),
    )
    def _refresh(_n: int | None, session_id: str, version: int) -> tuple[Any, ...]:
        data = registry.snapshot(session_id)
        if data is None or data.version == version:
            raise PreventUpdate
        ceilings = figures.session_ceilings(data, registry.calibration(data))
        options = _kernel_options(data)
        return (
            f"{scrub(data.header.problem_name)} · {data.header.session_id}",
            _summary(data),
            figures.trajectory_figure(data),
            figures.roofline_figure(data, ceilings),
            figures.table_rows(data),
            options,
            options,
            landscape_3d_figure(data),
            data.version,
        )

    @app.callback(
        out("session-tsne", "figure"), dash.Input("session-version", "data"), dash.State("session-id", "data")
    )
    def _tsne(version: int, session_id: str) -> Any:
        if version < 0:  # the page's first call, before the refresh read anything: the placeholder stays
            raise PreventUpdate
        data = registry.snapshot(session_id)
        if data is None:
            raise PreventUpdate
        return tsne.figure(data)

    @app.callback(out("session-table", "dashGridOptions"), dash.Input("session-search", "value"))
    def _search(text: str | None) -> dict[str, Any]:
        return {"animateRows": False, "quickFilterText": text or ""}

    @app.callback(
        out("session-diff", "children"),
        dash.Input("session-diff-a", "value"),
        dash.Input("session-diff-b", "value"),
        dash.State("session-id", "data"),
    )
    def _diff(a: int | None, b: int | None, session_id: str) -> Any:
        data = registry.snapshot(session_id)
        if data is None or a is None or b is None:
            return html.P("pick two kernels to compare them side by side")
        return _diff_table(data, a, b)

    @app.callback(
        out("session-utilisation", "figure"),
        dash.Input("session-profile-pick", "value"),
        dash.State("session-id", "data"),
    )
    def _utilisation(iteration: int | None, session_id: str) -> Any:
        profile, error = _profile(registry.snapshot(session_id), iteration)
        return figures.message_figure("Resource utilisation", error) if error else figures.utilisation_figure(profile)

    @app.callback(
        out("session-heatmap", "children"),
        dash.Input("session-heatmap-load", "n_clicks"),
        dash.State("session-profile-pick", "value"),
        dash.State("session-id", "data"),
        prevent_initial_call=True,
    )
    def _heatmap(_clicks: int | None, iteration: int | None, session_id: str) -> Any:
        profile, error = _profile(registry.snapshot(session_id), iteration)
        figure = figures.message_figure("Memory access heatmap", error) if error else figures.heatmap_figure(profile)
        return dcc.Graph(id="session-heatmap-graph", figure=figure)
