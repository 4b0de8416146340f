"""The dashboard's incremental reader and its figures, as pure functions of real recorded sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_code.dashboard import figures
from kernel_code.dashboard.data import IterationRow, SessionReader, load_deep_profile, profiled_iterations
from kernel_code.dashboard.diff import DiffRow, diff_rows, highlight
from kernel_code.dashboard.landscape import features, tsne_figure
from openkernel.errors import StoreError
from openkernel.hardware import Calibration
from tests.kernel_code.dashboard.sessions import STEPS, kernel_profile, recorded, write_profile
from tests.trace_sessions import Step

SUMMARY = [  # (iteration, intent, status, decision, speedup, runtime_ms) of the recorded STEPS
    (0, "one row per program", "correct", "keep", 2.0, 1.0),
    (1, "two rows per program", "correct", "keep", 4.0, 0.5),
    (2, "tiny blocks", "correct", "discard", 2.5, 0.8),
    (3, "online softmax", "incorrect", "error", None, None),
    (4, "", None, "error", None, None),
    (5, "vectorised loads", "correct", "keep", 5.0, 0.4),
    (6, "persistent rows", "correct", "discard", 2.0 / 0.6, 0.6),
]


def _summary(rows: tuple[IterationRow, ...]) -> list[tuple[object, ...]]:
    return [(r.iteration, r.intent, r.status, r.decision, r.speedup, r.runtime_ms) for r in rows]


def test_the_reader_folds_a_recorded_session(tmp_path: Path) -> None:
    reader = SessionReader(recorded(tmp_path / "s"))
    assert reader.poll() is True
    data = reader.snapshot()
    assert _summary(data.rows) == SUMMARY
    assert (data.best_iteration, data.finished) == (5, True)
    assert (data.header.problem_name, data.header.backend, data.header.model, data.header.hardware_label) == (
        "softmax_fp32",
        "triton",
        "openai:gpt-test",
        "NVIDIA H200",
    )
    assert [r.kernel_file for r in data.rows][:2] == ["kernels/iter_0000.py", "kernels/iter_0001.py"]
    assert reader.poll() is False  # nothing new: nothing read


def test_the_reader_reads_only_new_lines_and_waits_for_a_torn_last_line(tmp_path: Path) -> None:
    full = recorded(tmp_path / "full")
    lines = (full / "events.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"decision"' in line[:40] and b'"iteration": 2' in line) + 1
    live = tmp_path / "live"
    live.mkdir()
    (live / "config.json").write_bytes((full / "config.json").read_bytes())
    events = live / "events.jsonl"
    events.write_bytes(b"".join(lines[:cut]))
    reader = SessionReader(live)
    reader.poll()
    assert _summary(reader.snapshot().rows) == SUMMARY[:3]
    half = len(lines[cut]) // 2
    with open(events, "ab") as f:
        f.write(lines[cut][:half])  # a writer mid-line
    assert reader.poll() is False
    assert _summary(reader.snapshot().rows) == SUMMARY[:3]
    with open(events, "ab") as f:
        f.write(lines[cut][half:] + b"".join(lines[cut + 1 :]))
    assert reader.poll() is True
    assert _summary(reader.snapshot().rows) == SUMMARY
    assert reader.snapshot().finished is True


def test_trajectory_colours_decisions_and_draws_the_best_so_far(tmp_path: Path) -> None:
    reader = SessionReader(recorded(tmp_path / "s"))
    reader.poll()
    fig = figures.trajectory_figure(reader.snapshot())
    traces = {t.name: t for t in fig.data}
    assert list(traces) == ["keep", "discard", "error", "best so far"]
    assert (list(traces["keep"].x), list(traces["keep"].y)) == ([0, 1, 5], [2.0, 4.0, 5.0])
    assert traces["keep"].marker.color == figures.COLOURS["keep"]
    assert list(traces["error"].x) == [3, 4]
    assert list(traces["best so far"].y) == [2.0, 4.0, 4.0, 4.0, 4.0, 5.0, 5.0]
    hover = traces["discard"].hovertext[0]
    assert (
        hover == "iteration 2<br>intent: tiny blocks<br>speedup: 2.500x<br>status: correct · discard<br>runtime: 0.8 ms"
    )


def test_roofline_uses_the_results_ceilings_or_a_calibrations_measured_ones(tmp_path: Path) -> None:
    reader = SessionReader(recorded(tmp_path / "s"))
    reader.poll()
    data = reader.snapshot()
    datasheet = figures.session_ceilings(data, None)
    assert datasheet == figures.RooflineCeilings("NVIDIA H200", 4e12, "datasheet", 50e12, "fp32", "datasheet")
    calibration = Calibration("NVIDIA H200", "2026-11-30", 4.25e12, {"fp32": 51e12}, "2.11", "13.0", None)
    measured = figures.session_ceilings(data, calibration)
    assert measured == figures.RooflineCeilings("NVIDIA H200", 4.25e12, "measured", 51e12, "fp32", "measured")
    fig = figures.roofline_figure(data, measured)
    assert (fig.layout.xaxis.type, fig.layout.yaxis.type) == ("log", "log")
    traces = {t.name.split(":")[0]: t for t in fig.data}
    assert traces["NVIDIA H200"].name == "NVIDIA H200: 4.25 TB/s (measured), fp32 51 TFLOP/s (measured)"
    assert max(traces["NVIDIA H200"].y) == 51e12
    assert (list(traces["reference"].x), list(traces["reference"].y)) == ([0.625], [5_000_000 / 2e-3])
    kernels = {t.name: t for t in fig.data[2:]}
    assert list(kernels) == ["kernels: keep", "kernels: discard"]
    assert list(kernels["kernels: keep"].y) == pytest.approx([5e9, 1e10, 1.25e10])  # 1, 0.5, 0.4 ms
    assert list(kernels["kernels: keep"].x) == [0.625] * 3


def test_the_table_rows_hold_numbers_and_scrub_secrets(tmp_path: Path) -> None:
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    steps = [Step("import torch\n", f"try the key {key}", runtime_ms=1.0)]
    reader = SessionReader(recorded(tmp_path / "s", steps))
    reader.poll()
    rows = figures.table_rows(reader.snapshot())
    assert len(rows) == 1
    assert key not in json.dumps(rows)
    assert rows[0]["intent"].startswith("try the key [REDACTED")
    assert {k: v for k, v in rows[0].items() if k != "intent"} == {
        "iteration": 0,
        "status": "correct",
        "decision": "keep",
        "speedup": 2.0,
        "runtime_ms": 1.0,
        "bottleneck": "latency_bound",
        "pct_of_peak": 0.2,
        "reason": "first correct kernel (1 ms, speedup 2x)",
        "best": True,
    }


def test_deep_profile_panels_say_not_profiled_or_show_the_counters(tmp_path: Path) -> None:
    session = recorded(tmp_path / "s")
    assert profiled_iterations(session) == ()
    assert load_deep_profile(session, 1) is None
    empty = figures.utilisation_figure(None)
    assert empty.layout.annotations[0].text.startswith("not profiled")
    assert figures.heatmap_figure(None).layout.annotations[0].text.startswith("not profiled")
    write_profile(session, 1)
    assert profiled_iterations(session) == (1,)
    profile = load_deep_profile(session, 1)
    assert profile is not None and profile.kernels == (kernel_profile(),)
    gauges = figures.utilisation_figure(profile)
    values = {t.title.text: t.value for t in gauges.data if t.mode == "gauge+number"}
    assert values == {
        "achieved occupancy": 45.0,
        "SM throughput": 22.0,
        "DRAM bandwidth": 71.5,
        "L1 hit rate": 3.5,
        "L2 hit rate": 12.0,
    }
    heat = figures.heatmap_figure(profile).data[0]
    assert list(heat.y) == ["10: x = tl.load(ptr + offs)", "11: m = tl.max(x, axis=0)", "14: tl.store(out + offs, y)"]
    z = [list(row) for row in heat.z]
    assert z[0] == [1.0, 1.0, 1.0, 0.0, None, 1.0]
    assert z[2] == [0.25, 0.5, 0.0, 0.0, None, 10 / 90]


def test_a_malformed_profile_is_a_store_error_that_says_how_to_fix_it(tmp_path: Path) -> None:
    session = recorded(tmp_path / "s", STEPS[:1])
    (session / "profiles").mkdir()
    (session / "profiles" / "iter_0000.json").write_text('{"kernels": [{"launch_index": 0}]}')
    with pytest.raises(StoreError, match=r"iter_0000.json is not a deep profile .*kernel-code profile --json"):
        load_deep_profile(session, 0)


def test_diff_rows_align_lines_and_highlight_colours_tokens() -> None:
    left = "import torch\nBLOCK = 256\nx = 1\n"
    right = "import torch\nBLOCK = 1024\nx = 1\ny = 2\n"
    assert diff_rows(left, right) == [
        DiffRow("same", 1, "import torch", 1, "import torch"),
        DiffRow("changed", 2, "BLOCK = 256", 2, "BLOCK = 1024"),
        DiffRow("same", 3, "x = 1", 3, "x = 1"),
        DiffRow("added", None, "", 4, "y = 2"),
    ]
    assert highlight("import torch  # hi") == [("import", "#0000ff"), (" torch  ", None), ("# hi", "#6a737d")]


def test_tsne_says_when_a_session_is_too_small_and_maps_a_larger_one(tmp_path: Path) -> None:
    small = SessionReader(recorded(tmp_path / "small", STEPS[:3]))
    small.poll()
    message = tsne_figure(small.snapshot(), {}).layout.annotations[0].text
    assert message == "t-SNE needs at least 5 timed kernels; this session has 3 so far"
    reader = SessionReader(recorded(tmp_path / "s"))
    reader.poll()
    data = reader.snapshot()
    timed = [r for r in data.rows if r.runtime_ms is not None]
    sources = {s.iteration: (data.path / s.kernel_file).read_text() for s in timed if s.kernel_file}
    table = features(timed, sources)
    assert table.shape == (5, 38)
    fig = tsne_figure(data, sources)
    assert len(fig.data[0].x) == 5
    assert list(fig.data[0].marker.color) == [2.0, 4.0, 2.5, 5.0, 2.0 / 0.6]
    assert "<sup>5 kernels, perplexity 2; features: intent words" in fig.layout.title.text
