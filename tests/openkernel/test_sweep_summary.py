"""A sweep's record and summary without Ray: fast_p and the geomean by hand, the record's round trip,
its torn lines, each problem's row, and the pieces a task and the driver decide by (resources, pinning)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from openkernel.errors import ConfigError
from openkernel.sweeps import (
    ProblemRow,
    SessionOutcome,
    SweepConfig,
    SweepRecord,
    fast_p,
    find_sweep,
    geomean_speedup,
    summarise,
)
from openkernel.sweeps.cluster import TaskResources, task_resources
from openkernel.sweeps.record import from_json, to_json
from openkernel.sweeps.summary import measures_text, speedup_text
from openkernel.sweeps.task import pin_devices
from tests.sweep_records import RAISED, ROW_SUM, SOFTMAX, SWEEP_ID, entries, write_record

CPU = "cpu (Triton interpreter)"


def _outcome(speedup: float | None, timed: bool = True, best: int | None = 0) -> SessionOutcome:
    return SessionOutcome("iteration budget spent (3 of 3)", 3, best, speedup, timed, 0, 0.0, CPU)


def test_fast_p_counts_every_problem_and_only_correct_faster_kernels() -> None:
    # 5 problems: 3.0x, 1.2x, 0.8x correct; one without a correct kernel; one that failed (no outcome).
    outcomes = [_outcome(3.0), _outcome(1.2), _outcome(0.8), _outcome(None, best=None), None]
    assert [fast_p(outcomes, p) for p in (0.0, 1.0, 1.5, 2.0)] == [3 / 5, 2 / 5, 1 / 5, 1 / 5]
    assert geomean_speedup(outcomes) == pytest.approx((3.0 * 1.2 * 0.8) ** (1 / 3))
    assert fast_p([], 0.0) is None
    assert geomean_speedup([None, _outcome(None, best=None)]) is None


def test_cpu_speedups_count_for_correctness_only() -> None:
    outcomes = [_outcome(0.0002, timed=False), _outcome(0.0001, timed=False), None]
    assert [fast_p(outcomes, p) for p in (0.0, 1.0, 1.5, 2.0)] == [2 / 3, None, None, None]
    assert geomean_speedup(outcomes) is None
    assert [speedup_text(o) for o in (*outcomes, _outcome(1.4567))] == ["0.0002x cpu*", "0.0001x cpu*", "—", "1.46x"]


def test_summary_of_a_record_by_hand(tmp_path: Path) -> None:
    summary = summarise(write_record(tmp_path))
    d = {n: str(tmp_path / f"s-{n}") for n in ("softmax_fp32-1", "row_sum_fp32-2", "log_softmax_fp32-1")}
    assert summary.rows == (
        ProblemRow("softmax_fp32", "finished", 1, d["softmax_fp32-1"], SOFTMAX.reason, SOFTMAX),
        ProblemRow("row_sum_fp32", "finished", 2, d["row_sum_fp32-2"], ROW_SUM.reason, ROW_SUM),
        ProblemRow("log_softmax_fp32", "failed", 1, d["log_softmax_fp32-1"], f"raised: {RAISED}", None),
    )
    # 2.5x and 1.2x correct of three problems; the geomean of 2.5 and 1.2 is sqrt(3).
    assert summary.fast_p == ((0.0, 2 / 3), (1.0, 2 / 3), (1.5, 1 / 3), (2.0, 1 / 3))
    assert summary.geomean_speedup == pytest.approx(math.sqrt(3.0))
    assert (summary.tokens, summary.cost_usd, summary.cost_unknown, summary.complete) == (1500, 0.01, 1, True)
    assert measures_text(summary) == (
        "fast_0 0.67 (2/3) · fast_1 0.67 (2/3) · fast_1.5 0.33 (1/3) · fast_2 0.33 (1/3) · geomean 1.73x · "
        "1,500 tokens · $0.0100 + 1 at an unknown price"
    )


def test_a_running_sweep_shows_running_and_retrying_problems(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "sweep.jsonl").touch()
    record = SweepRecord(folder)
    for entry in entries(tmp_path)[:6]:  # up to row_sum_fp32's death, before its retry is submitted
        record.append(entry)
    summary = summarise(folder)
    assert [(r.problem, r.status, r.attempts) for r in summary.rows] == [
        ("softmax_fp32", "running", 1),
        ("row_sum_fp32", "retrying", 1),
        ("log_softmax_fp32", "failed", 1),
    ]
    assert (summary.fast_p[0], summary.complete) == ((0.0, 0.0), False)


def test_every_entry_survives_the_round_trip_through_json(tmp_path: Path) -> None:
    written = entries(tmp_path)
    assert [from_json(json.loads(json.dumps(to_json(e)))) for e in written] == written
    first = to_json(written[0])
    assert list(first)[:3] == ["schema_version", "kind", "sweep_id"]
    assert first["problems"][0]["small_sizes"] == [["batch_size", 64], ["dim", 781]]


def test_a_torn_line_is_skipped_and_closed_off_but_a_foreign_entry_is_an_error(tmp_path: Path) -> None:
    folder = write_record(tmp_path, complete=False)
    path = folder / "sweep.jsonl"
    with path.open("ab") as f:
        f.write(b'{"schema_version": 1, "kind": "sweep_fin')  # the driver killed mid-write
    record = SweepRecord.open(folder)
    assert len(record.read()) == len(entries(tmp_path, complete=False))
    record.append(entries(tmp_path)[-1])
    assert path.read_bytes().endswith(
        b'"kind": "sweep_fin\n' + json.dumps(to_json(entries(tmp_path)[-1])).encode() + b"\n"
    )
    assert summarise(folder).complete
    with path.open("ab") as f:
        f.write(b'{"schema_version": 9, "kind": "sweep_finished"}\n')
    with pytest.raises(ConfigError, match=r"line 12: schema_version 9 is not one this kernel-code reads"):
        record.read()


def test_find_sweep_by_id_or_folder(tmp_path: Path) -> None:
    folder = write_record(tmp_path)
    assert find_sweep(SWEEP_ID, tmp_path) == folder
    assert find_sweep(folder, tmp_path / "elsewhere") == folder
    with pytest.raises(ConfigError, match=r"no sweep 'nope': give a sweep folder, or the id of one in .*\.sweeps"):
        find_sweep("nope", tmp_path)


def test_each_session_holds_a_gpu_when_the_cluster_has_them_else_a_cpu_slot() -> None:
    assert task_resources(1.0, 2.0) == TaskResources({"num_cpus": 1, "num_gpus": 1.0}, "1 GPU")
    assert task_resources(2.0, 8.0).label == "2 GPUs"
    note = "no GPUs in the cluster: each session runs on a CPU slot (correctness only, no GPU timings)"
    assert task_resources(1.0, 0.0) == TaskResources({"num_cpus": 1}, "1 CPU slot", note)
    assert task_resources(0.0, 2.0).note == "--gpus-per-session 0: " + note.split(": ", 1)[1]
    with pytest.raises(ConfigError, match=r"the cluster has 2 GPUs, fewer than --gpus-per-session 4"):
        task_resources(4.0, 2.0)


def test_a_task_pins_the_gpus_ray_gave_it_and_a_cpu_slot_sees_none() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert (pin_devices([3], env), env) == ("cuda", {"CUDA_VISIBLE_DEVICES": "3"})
    assert (pin_devices([], env), env) == ("cpu", {"CUDA_VISIBLE_DEVICES": ""})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"gpus_per_session": -1.0}, "--gpus-per-session must be 0 or more, not -1.0"),
        ({"max_attempts": 0}, "--max-attempts must be at least 1, not 0"),
        ({"local_cpus": 0}, "--local-cpus must be at least 1, not 0"),
        ({"ray": " "}, "--ray needs a cluster address, or 'local' to start a Ray on this machine"),
    ],
)
def test_a_bad_sweep_config_says_how_to_fix_it(config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        SweepConfig(**config)  # type: ignore[arg-type]
    assert str(err.value) == message
