"""Time the dashboard's first load of a 10,000-iteration session: the data read and every figure built.

A synthetic session in the store's real format (events written by the real store, one kernel file per
iteration) under a temporary directory; prints the timings (the issue's target: under 2 s).

    .venv/bin/python bench/dashboard_10k.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel_code.dashboard import figures
from kernel_code.dashboard.data import SessionReader
from kernel_code.dashboard.landscape import TSNE_MAX_POINTS, landscape_3d_figure, tsne_figure, warm_up
from kernel_code.dashboard.pages.session import _read_kernel
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


def write_session(home: Path) -> Path:
    config = SessionConfig("triton", "synthetic", "full", ITERATIONS, None, None, None)
    store = DirectoryStore.create_at(home / "s10k", "softmax_fp32", config)
    sid = store.session_id
    lines = [SessionStarted(sid, 0.0, "softmax_fp32", "p.py", "triton", "synthetic", "cuda:0", "NVIDIA H200", config)]
    best, best_ms = None, 2.0
    for i in range(ITERATIONS):
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


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_session(Path(tmp))
        warm_up()  # the server does this once at start
        t0 = time.perf_counter()
        reader = SessionReader(path)
        reader.poll()
        data = reader.snapshot()
        t1 = time.perf_counter()
        ceilings = figures.session_ceilings(data, None)
        built = [
            figures.trajectory_figure(data),
            figures.roofline_figure(data, ceilings),
            figures.utilisation_figure(None),
            landscape_3d_figure(data),
        ]
        rows = figures.table_rows(data)
        t2 = time.perf_counter()
        timed = [r.iteration for r in data.rows if r.runtime_ms is not None][-TSNE_MAX_POINTS:]
        sources = {i: s for i in timed if (s := _read_kernel(data, i)) is not None}
        built.append(tsne_figure(data, sources))
        t3 = time.perf_counter()
        print(f"{len(data.rows)} iterations, {len(rows)} table rows, {len(built)} figures")
        print(f"read events.jsonl:              {t1 - t0:6.2f} s")
        print(f"trajectory, roofline, gauges, 3D, table: {t2 - t1:6.2f} s")
        print(f"t-SNE of the latest 200 kernels: {t3 - t2:6.2f} s")
        print(f"first load, all figures:        {t3 - t0:6.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
