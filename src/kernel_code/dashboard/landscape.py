"""The optimisation landscape: kernel variants as points, coloured by speedup (pure functions).

Two views. A 3D scatter of what was measured: iteration, runtime and % of the roofline's peak. And a
t-SNE map (scikit-learn) of features built from what a session holds, nothing invented:

- the intent's words, hashed into ``_INTENT_BUCKETS`` counts (the generator's own description);
- the kernel's launch parameters read from its source (``BLOCK_SIZE = 1024``, ``num_warps=4``, any
  upper-case constant assigned a whole number), log2-scaled and hashed into ``_PARAM_BUCKETS``;
- log10 of the runtime and the % of peak from the result's roofline.

Columns are standardised, so no family of features dominates by its units. t-SNE needs a handful
of points to mean anything: under ``TSNE_MIN_POINTS`` the figure says so instead. It runs on the
latest ``TSNE_MAX_POINTS`` timed kernels (its cost grows fast with the count), and says so too.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from kernel_code.dashboard.data import IterationRow, SessionData
from kernel_code.dashboard.figures import floats, message_figure, scrubbed, texts

__all__ = ["TSNE_MAX_POINTS", "TSNE_MIN_POINTS", "features", "landscape_3d_figure", "tsne_figure", "warm_up"]

TSNE_MIN_POINTS = 5
TSNE_MAX_POINTS = 200  # exact t-SNE of 200 points: ~0.5 s on one CPU core
_INTENT_BUCKETS = 24
_FEATURES = "intent words, launch parameters, runtime, % of peak"
_PARAM_BUCKETS = 12
_WORD = re.compile(r"[a-z][a-z0-9_]+")
_PARAM = re.compile(r"\b([A-Z][A-Z0-9_]*|num_warps|num_stages)\s*[=:]\s*(\d+)\b")


def _timed(data: SessionData) -> list[IterationRow]:
    return [r for r in data.rows if r.runtime_ms is not None and r.runtime_ms > 0 and r.speedup is not None]


def _pct_of_peak(row: IterationRow) -> float | None:
    value = (row.profile or {}).get("pct_of_peak")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _hover(row: IterationRow) -> str:
    return f"iteration {row.iteration}<br>{scrubbed(row.intent)}<br>speedup {row.speedup or 0:.3f}x"


def landscape_3d_figure(data: SessionData) -> go.Figure:
    """Iteration x runtime x % of peak for every timed kernel, coloured by speedup."""
    title = "Optimisation landscape (3D)"
    rows = _timed(data)
    if not rows:
        return message_figure(title, "no timed kernel yet")
    fig = go.Figure(
        go.Scatter3d(
            x=np.array([r.iteration for r in rows]),
            y=floats(r.runtime_ms for r in rows),
            z=floats(_pct_of_peak(r) for r in rows),
            mode="markers",
            **_points_by_speedup(rows, 5),
        )
    )
    fig.update_layout(
        title=title,
        scene={"xaxis_title": "iteration", "yaxis_title": "runtime (ms)", "zaxis_title": "% of peak"},
        margin={"l": 0, "r": 0, "t": 50, "b": 0},
        template="plotly_white",
    )
    return fig


def _bucket(token: str, buckets: int) -> int:
    return zlib.crc32(token.encode()) % buckets  # stable across runs, unlike hash()


def features(rows: list[IterationRow], sources: Mapping[int, str]) -> np.ndarray:
    """One standardised feature row per kernel (see the module docstring for what each column is)."""
    table = np.zeros((len(rows), _INTENT_BUCKETS + _PARAM_BUCKETS + 2))
    for i, row in enumerate(rows):
        for word in _WORD.findall(row.intent.lower()):
            table[i, _bucket(word, _INTENT_BUCKETS)] += 1.0
        for name, value in _PARAM.findall(sources.get(row.iteration, "")):
            table[i, _INTENT_BUCKETS + _bucket(name, _PARAM_BUCKETS)] += math.log2(int(value) + 1)
        table[i, -2] = math.log10(row.runtime_ms or 1.0)
        table[i, -1] = _pct_of_peak(row) or 0.0
    spread = table.std(axis=0)
    spread[spread == 0] = 1.0
    standardised: np.ndarray = (table - table.mean(axis=0)) / spread
    return standardised


def tsne_figure(data: SessionData, sources: Mapping[int, str]) -> go.Figure:
    """A 2D t-SNE map of the latest timed kernels (``sources``: iteration -> kernel source, may be partial)."""
    title = "Optimisation landscape (t-SNE)"
    timed = _timed(data)
    if len(timed) < TSNE_MIN_POINTS:
        return message_figure(
            title, f"t-SNE needs at least {TSNE_MIN_POINTS} timed kernels; this session has {len(timed)} so far"
        )
    rows = timed[-TSNE_MAX_POINTS:]
    from sklearn.manifold import TSNE  # imported here: scikit-learn takes a second to import

    perplexity = float(min(30, max(2, (len(rows) - 1) // 3)))
    embedded = TSNE(
        n_components=2, perplexity=perplexity, init="pca", random_state=0, max_iter=250, method="exact"
    ).fit_transform(features(rows, sources))
    fig = go.Figure(
        go.Scatter(
            x=embedded[:, 0],
            y=embedded[:, 1],
            mode="markers",
            **_points_by_speedup(rows, 9),
        )
    )
    shown = f"{len(rows)} kernels" + (f" (the latest of {len(timed)})" if len(timed) > len(rows) else "")
    fig.update_layout(
        title=f"{title}<br><sup>{shown}, perplexity {perplexity:g}; features: {_FEATURES}</sup>",
        xaxis={"title": "t-SNE 1", "showticklabels": False},
        yaxis={"title": "t-SNE 2", "showticklabels": False},
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 70, "b": 50},
    )
    return fig


def warm_up() -> None:
    """Do the lazy imports once, before the server's threads race to them and before a first page waits on them.

    Two callbacks that first import pandas at the same time get a half-initialised module. And plotly
    imports each trace's and layout part's classes the first time one is built (a quarter of a second
    for the session page's kinds): one small figure of each kind, serialised, does it at server start.
    """
    from plotly.io.json import to_json_plotly

    xs, marker = np.zeros(2), {"color": np.zeros(2), "colorscale": "Viridis", "colorbar": {"title": "x"}}
    fig = go.Figure(go.Scatter(x=xs, y=[0, 1], mode="markers", marker=marker, hovertext=texts(["a", "b"])))
    fig.add_trace(go.Scatter3d(x=xs, y=xs, z=xs, mode="markers", marker=marker))
    fig.add_trace(go.Indicator(mode="gauge+number", value=1.0, gauge={"axis": {"range": [0, 100]}}))
    fig.add_hline(y=1.0, line={"dash": "dot"}, annotation_text="reference")
    fig.update_layout(title="warm-up", template="plotly_white", scene={"xaxis_title": "x"}, xaxis={"type": "log"})
    to_json_plotly(message_figure("warm-up", "nothing"))
    to_json_plotly(fig)
    import sklearn.manifold  # noqa: F401


def _points_by_speedup(rows: Sequence[IterationRow], size: int) -> dict[str, Any]:
    """Markers coloured by speedup, with each kernel's hover text: both landscape views draw them so."""
    return {
        "marker": {
            "size": size,
            "color": floats(r.speedup for r in rows),
            "colorscale": "Viridis",
            "colorbar": {"title": "x"},
        },
        "hovertext": texts(_hover(r) for r in rows),
        "hoverinfo": "text",
    }
