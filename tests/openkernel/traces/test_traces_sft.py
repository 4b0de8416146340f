"""The training export on recorded sessions: exactly which pairs, with exactly which instruction."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from openkernel.errors import ConfigError
from openkernel.traces.build import TraceRow, build_trace
from openkernel.traces.sft import SftPair, select_pairs, write_pairs
from openkernel.traces.write import to_table
from tests.trace_sessions import KERNEL_A, KERNEL_B, PROBLEM, STEPS, Step, record

SOURCE = PROBLEM.path.read_text().rstrip()


@pytest.fixture
def rows(tmp_path: Path) -> list[TraceRow]:
    record(tmp_path / "s1", STEPS)  # correct: #0 2x, #1 4x
    record(tmp_path / "s2", STEPS[1:3], hardware="NVIDIA A100", hints=("use tl.max",))  # correct: #0 4x
    record(tmp_path / "s3", [Step(KERNEL_A, "a", 0.8), Step(KERNEL_B, "b", 0.4)])  # correct: #0 2.5x, #1 5x
    return [build_trace(tmp_path / name) for name in ("s1", "s2", "s3")]


def _pair(session: str, iteration: int, kernel: str, speedup: float, instruction: str, gpu: str = "H200") -> SftPair:
    return SftPair(instruction, kernel, session, iteration, "custom:softmax_fp32", f"NVIDIA {gpu}", "triton",
                   "openai:gpt-test", speedup, True)  # fmt: skip


def _instruction(gpu: str, middle: str) -> str:
    return (
        f"Write a faster triton kernel for this PyTorch reference, to run on NVIDIA {gpu}. Reply with one Python "
        "file that defines `ModelNew`, with the same constructor arguments, inputs and outputs as `Model`.\n\n"
        f"## Reference: custom:softmax_fp32\n\n```python\n{SOURCE}\n```\n\n{middle}\n"
    )


DIAGNOSED = "## Profile of the kernel before this one\n\nBottleneck: memory_bound (iteration 0)\n- Fuse the passes"
S3_1 = _pair("s3", 1, KERNEL_B, 5.0, _instruction("H200", f"## Approach\n\nb\n\n{DIAGNOSED}"))
S1_1 = _pair("s1", 1, KERNEL_B, 4.0, _instruction("H200", f"## Approach\n\ntwo rows per program\n\n{DIAGNOSED}"))
HINTED = "## Approach\n\ntwo rows per program\n\n## Hints\n\n- use tl.max"
S2_0 = _pair("s2", 0, KERNEL_B, 4.0, _instruction("A100", HINTED), gpu="A100")


def test_the_best_fraction_by_speedup_fastest_first(rows: list[TraceRow]) -> None:
    table = to_table(rows)  # 5 correct iterations: 5x, 4x, 4x, 2.5x, 2x
    assert select_pairs(table, 0.1) == [S3_1]  # 0.5 rounds up: any pool gives a pair
    assert select_pairs(table, 0.4) == [S3_1, S1_1]  # the 4x tie goes to the earlier session id
    assert select_pairs(table, 0.5) == [S3_1, S1_1, S2_0]
    assert [(p.session_id, p.iteration, p.speedup) for p in select_pairs(table, 1.0)] == [
        ("s3", 1, 5.0), ("s1", 1, 4.0), ("s2", 0, 4.0), ("s3", 0, 2.5), ("s1", 0, 2.0),
    ]  # fmt: skip


def test_pairs_are_written_as_json_lines(rows: list[TraceRow], tmp_path: Path) -> None:
    path = write_pairs(select_pairs(to_table(rows), 0.4), tmp_path / "out" / "pairs.jsonl")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [asdict(S3_1), asdict(S1_1)]
    assert list(json.loads(path.read_text().splitlines()[0])) == [
        "instruction", "output", "session_id", "iteration", "problem", "hardware", "backend", "model", "speedup",
        "timing_valid",
    ]  # fmt: skip


def test_ten_percent_of_thirty_is_three(rows: list[TraceRow]) -> None:
    session = rows[0]
    template = session["iterations"][0]
    session["iterations"] = []
    for i in range(30):
        it = copy.deepcopy(template)
        it["iteration"], it["eval_result"]["speedup"] = i, 1.0 + i
        session["iterations"].append(it)
    assert [p.iteration for p in select_pairs(to_table([session]), 0.1)] == [29, 28, 27]


def test_iterations_without_the_reference_source_are_left_out(rows: list[TraceRow]) -> None:
    rows[2]["problem_source"] = None  # s3's problem file was gone at export
    assert [(p.session_id, p.iteration) for p in select_pairs(to_table(rows), 1.0)] == [("s1", 1), ("s2", 0), ("s1", 0)]


@pytest.mark.parametrize("top", [0.0, -0.1, 1.5, float("nan")])
def test_top_outside_zero_to_one_is_a_config_error(rows: list[TraceRow], top: float) -> None:
    with pytest.raises(ConfigError) as caught:
        select_pairs(to_table(rows), top)
    assert str(caught.value) == f"--top must be a fraction in (0, 1], e.g. 0.1 for the best 10%, got {top:g}"
