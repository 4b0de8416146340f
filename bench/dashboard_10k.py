"""Time the dashboard's first load of a 10,000-iteration session: the server's callbacks, as a page asks them.

A synthetic session in the store's real format (events written by the real store, one kernel file per
iteration) under a temporary directory. The real Dash app (``create_app``, token and all) answers the
requests a browser makes on opening ``/session/<id>``, through Flask's test client: the page layout
(which reads events.jsonl), then the callbacks the layout fires (the refresh that draws trajectory,
roofline, table, diff options and 3D landscape; the utilisation gauges; the diff and search boxes),
then the t-SNE callback that the refresh's new version fires. Each answer is the JSON the browser gets.
The issue's target: the first load, every panel but the t-SNE map (which shows "computing t-SNE…"
until its own callback answers), under 2 s. Only the server's side: the browser's drawing is not in it.

    .venv/bin/python bench/dashboard_10k.py [--iterations N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flask.testing import FlaskClient

from kernel_code.dashboard.server import DashboardConfig, create_app
from openkernel.events import (
    Decision,
    EvaluationFinished,
    IterationStarted,
    KernelProposed,
    SessionConfig,
    SessionStarted,
)
from openkernel.store import DirectoryStore
from tests.trace_sessions import result

ITERATIONS = 10_000
TOKEN = "b" * 43


def write_session(home: Path, iterations: int = ITERATIONS) -> Path:
    config = SessionConfig("triton", "synthetic", "full", iterations, None, None, None)
    store = DirectoryStore.create_at(home / "s10k", "softmax_fp32", config)
    sid = store.session_id
    lines = [SessionStarted(sid, 0.0, "softmax_fp32", "p.py", "triton", "synthetic", "cuda:0", "NVIDIA H200", config)]
    best, best_ms = None, 2.0
    for i in range(iterations):
        runtime_ms = 0.3 + (i * 7919 % 1000) / 500.0 if i % 7 else None  # every 7th is wrong
        kernel = f"kernels/iter_{i:04d}.py"
        (store.path / kernel).write_text(f"import torch\nBLOCK_SIZE = {2 ** (6 + i % 7)}\nnum_warps = {2 ** (i % 4)}\n")
        keep = runtime_ms is not None and runtime_ms < best_ms
        if keep:
            best, best_ms = i, runtime_ms
        decision = "keep" if keep else ("error" if runtime_ms is None else "discard")
        speedup = 2.0 / runtime_ms if runtime_ms else None
        lines += [
            IterationStarted(sid, float(i), i, f"variant {i % 13} block {2 ** (6 + i % 7)}"),
            KernelProposed(sid, float(i), i, kernel, f"variant {i % 13}", "0" * 64),
            EvaluationFinished(sid, float(i), i, result(runtime_ms).to_json()),
            Decision(sid, float(i), i, decision, "synthetic", speedup, best),
        ]
    from openkernel.store import _line  # the store's own serialisation, without an fsync per line

    with open(store.path / "events.jsonl", "wb") as f:
        f.writelines(_line(e) for e in lines)
    return store.path


def _ask(client: FlaskClient, app: Any, output: str, values: dict[str, Any]) -> tuple[float, int, Any]:
    """Call the callback whose output key is ``output`` as the page would (``values``: "id.property" -> value).

    The seconds it took, the bytes of the answer, and the answer (parsed); a refused call raises.
    """
    spec = app.callback_map[output]

    def props(kind: str) -> list[dict[str, Any]]:
        return [{**p, "value": values.get(f"{p['id']}.{p['property']}")} for p in spec[kind]]

    targets = [dict(zip(("id", "property"), o.rsplit(".", 1), strict=True)) for o in output.strip(".").split("...")]
    body = {
        "output": output,
        "outputs": targets if output.startswith("..") else targets[0],
        "inputs": props("inputs"),
        "state": props("state"),
        "changedPropIds": [f"{p['id']}.{p['property']}" for p in spec["inputs"]],
    }
    t0 = time.perf_counter()
    response = client.post("/_dash-update-component", json=body)
    seconds = time.perf_counter() - t0
    if response.status_code not in (200, 204):
        raise RuntimeError(f"{output}: HTTP {response.status_code}: {response.get_data(as_text=True)[:300]}")
    raw = response.get_data()
    return seconds, len(raw), json.loads(raw) if raw else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help=f"session length (default {ITERATIONS})")
    iterations = parser.parse_args().iterations
    with tempfile.TemporaryDirectory() as tmp:
        path = write_session(Path(tmp) / "home", iterations)
        app = create_app(DashboardConfig(home=path.parent, token=TOKEN))  # warms up, as the server does at start
        client = app.server.test_client()
        client.get(f"/session/{path.name}?token={TOKEN}")  # the page itself, and the token cookie
        route, route_bytes, page = _ask(client, app, "page.children", {"url.pathname": f"/session/{path.name}"})
        if "session-missing" in json.dumps(page):
            raise RuntimeError(f"the server does not know the session {path.name}")
        ids: dict[str, Any] = {"session-id.data": path.name, "session-version.data": -1}
        refresh_key = next(k for k in app.callback_map if "session-version.data.." in k)
        refresh, refresh_bytes, answer = _ask(client, app, refresh_key, ids)
        version = answer["response"]["session-version"]["data"]
        others = 0.0
        for key in ("session-utilisation.figure", "session-diff.children", "session-table.dashGridOptions"):
            others += _ask(client, app, key, ids)[0]
        tsne, tsne_bytes, answer = _ask(client, app, "session-tsne.figure", {**ids, "session-version.data": version})
        points = len(answer["response"]["session-tsne"]["figure"]["data"][0]["hovertext"])
        first = route + refresh + others
        print(f"{iterations} iterations; the server's answers to a first visit of the session page:")
        print(f"page layout (reads events.jsonl):             {route:6.2f} s  ({route_bytes / 1e6:.2f} MB)")
        print(f"refresh: trajectory, roofline, table, 3D, ...: {refresh:6.2f} s  ({refresh_bytes / 1e6:.2f} MB)")
        print(f"gauges, diff, search callbacks:               {others:6.2f} s")
        print(f"first load, every panel but t-SNE:            {first:6.2f} s (target < 2 s)")
        print(f"t-SNE of the latest {points} kernels (after):       {tsne:6.2f} s  ({tsne_bytes / 1e6:.2f} MB)")
        print(f"every panel, t-SNE included:                  {first + tsne:6.2f} s")


if __name__ == "__main__":
    main()
