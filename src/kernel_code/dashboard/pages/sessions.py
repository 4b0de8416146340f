"""The sessions page: every session the server knows, newest first, each a link to its own page."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dash import dcc, html

from openkernel.traces.scrub import scrub

if TYPE_CHECKING:
    from kernel_code.dashboard.server import SessionRegistry

__all__ = ["COLUMNS", "layout"]

COLUMNS = ("session", "problem", "GPU", "backend", "model", "best speedup", "iterations", "started")


def layout(registry: SessionRegistry) -> html.Div:
    rows = []
    for session_id in reversed(list(registry.paths())):
        data = registry.snapshot(session_id)
        if data is None:
            continue
        h = data.header
        decided = [r for r in data.rows if r.decision is not None]
        best = next((r.speedup for r in data.rows if r.iteration == data.best_iteration), None)
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.started_at_unix_s)) if h.started_at_unix_s else "—"
        cells = (
            dcc.Link(session_id, href=f"/session/{session_id}"),
            scrub(h.problem_name),
            h.hardware_label or "—",
            h.backend or "—",
            scrub(h.model or "—"),
            "—" if best is None else f"{best:.3f}x",
            str(len(decided)),
            started,
        )
        rows.append(html.Tr([html.Td(c, style={"padding": "4px 10px"}) for c in cells]))
    table = html.Table(
        [
            html.Thead(html.Tr([html.Th(c, style={"textAlign": "left", "padding": "4px 10px"}) for c in COLUMNS])),
            html.Tbody(rows),
        ],
        id="sessions-table",
    )
    empty = html.P(f"no sessions under {registry.config.home}", id="sessions-empty") if not rows else None
    return html.Div([html.H2("kernel code · sessions"), table, empty], style={"padding": "10px 20px"})
