"""Session directory -> trace row: a session recorded by the real loop and store, checked whole."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from openkernel.errors import StoreError
from openkernel.events import (
    Decision,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Resumed,
    SessionConfig,
    SessionStarted,
)
from openkernel.store import DirectoryStore
from openkernel.traces.build import build_trace, problem_fields, ran_on
from tests.trace_sessions import KERNEL_A, KERNEL_B, KERNEL_C, PROBLEM, STEPS, Step, record

T0 = 1_795_000_000.0  # the session's start; each event is one second after the one before


def _profile(runtime_ms: float | None) -> dict[str, Any]:
    """The roofline of the scripted softmax (5e6 FLOP, 8e6 bytes) on 4 TB/s and 50 TFLOP/s, worked by hand."""
    sol_ms = 8e6 / 4e12 * 1e3  # memory-bound: 0.002 ms
    timed = runtime_ms is not None
    return {
        "bottleneck": "latency_bound" if timed else None,  # speed of light (2 us) is under one launch overhead
        "bound_by": "memory",
        "pct_of_peak": 100 * sol_ms / runtime_ms if runtime_ms is not None else None,
        "headroom": runtime_ms / sol_ms if runtime_ms is not None else None,
        "sol_time_ms": sol_ms,
        "flops": 5_000_000,
        "min_bytes": 8_000_000,
        "arithmetic_intensity_flops_per_byte": 0.625,
        "dtype": "float32",
        "compute_ceiling": "fp32",
        "achieved_bytes_per_s": 8e6 / (runtime_ms / 1e3) if runtime_ms is not None else None,
        "achieved_flops_per_s": 5e6 / (runtime_ms / 1e3) if runtime_ms is not None else None,
    }


def _eval(runtime_ms: float | None) -> dict[str, Any]:
    correct = runtime_ms is not None
    return {
        "status": "correct" if correct else "incorrect",
        "correctness": correct,
        "speedup": 2.0 / runtime_ms if runtime_ms is not None else None,
        "runtime_ms": runtime_ms,
        "reference_runtime_ms": 2.0,
        "timing_valid": correct,
        "timing_note": None,
        "reasons": ["all checks passed"] if correct else ["output differs at 3 of 4096 elements"],
        "device": "cuda:0 (NVIDIA H200)",
        "size": "full",
        "wall_seconds": 3.5,
        "profile": _profile(runtime_ms),
    }


def _diagnosis(iteration: int) -> dict[str, Any]:
    return {
        "bottleneck": "memory_bound",
        "headline": f"Bottleneck: memory_bound (iteration {iteration})",
        "lead": "The kernel reads its input twice",
        "evidence": ["72% of peak bandwidth"],
        "signals": ["low_l2_hit"],
        "changes": [],
        "next_steps": [
            {
                "title": "Fuse the passes",
                "why": "two reads of x",
                "skill_ids": ["fusion"],
                "expected_effect": "1.5x",
                "rank": 1,
                "profile_driven": True,
            }
        ],
    }


def _evaluated(iteration: int, intent: str, kernel: str, runtime_ms: float | None, decision: str, reason: str) -> Any:
    start = T0 + 1 + 7 * iteration  # started, delta, usage, proposed, evaluated, diagnosed, decided: 7 events
    return {
        "iteration": iteration,
        "backend": "triton",
        "intent": intent,
        "hints": [],
        "prompt": f"prompt for {intent}",
        "response": f"reply for {intent}",
        "kernel_code": kernel,
        "eval_result": _eval(runtime_ms),
        "critic_diagnosis": _diagnosis(iteration),
        "decision": decision,
        "decision_reason": reason,
        "prompt_tokens": 1000,
        "completion_tokens": 400,
        "tokens_used": 1400,
        "cost_usd": 0.01,
        "latency_seconds": 2.0,  # started -> usage (the delta came in between)
        "wall_seconds": 6.0,
        "started_at_unix_s": start,
    }


EXPECTED_ITERATIONS = [
    _evaluated(0, "one row per program", KERNEL_A, 1.0, "keep", "first correct kernel (1 ms, speedup 2x)"),
    _evaluated(
        1,
        "two rows per program",
        KERNEL_B,
        0.5,
        "keep",
        "faster than the best (iteration 0) beyond noise: median 0.5 ms < 1 ms "
        "(best 1 ms less half the wider p10-p90 band, 0 ms)",
    ),
    _evaluated(2, "online softmax", KERNEL_C, None, "error", "incorrect: output differs at 3 of 4096 elements"),
    {
        "iteration": 3,
        "backend": "triton",
        "intent": None,  # the reply had no code, and said no intent
        "hints": [],
        "prompt": "prompt for ",
        "response": "reply for ",
        "kernel_code": None,
        "eval_result": None,
        "critic_diagnosis": None,
        "decision": "error",
        "decision_reason": "no kernel: the reply had no code block",
        "prompt_tokens": 900,
        "completion_tokens": 10,
        "tokens_used": 910,
        "cost_usd": 0.01,
        "latency_seconds": 2.0,
        "wall_seconds": 3.0,
        "started_at_unix_s": T0 + 22,
    },
]


def test_a_recorded_session_becomes_one_whole_row(tmp_path: Path) -> None:
    record(tmp_path / "s1", STEPS, started_at_unix_s=T0)
    assert build_trace(tmp_path / "s1") == {
        "schema_version": 1,
        "session_id": "s1",
        "problem": {
            "key": "custom:softmax_fp32",
            "name": "softmax_fp32",
            "kernelbench_level": None,
            "kernelbench_id": None,
        },
        "problem_source": PROBLEM.path.read_text(),
        "hardware": "NVIDIA H200",
        "device": "cuda:0 (NVIDIA H200)",
        "backend": "triton",
        "model": "openai:gpt-test",
        "iterations": EXPECTED_ITERATIONS,
        "iteration_count": 4,
        "final_iteration": 1,
        "final_speedup": 4.0,
        "final_kernel": KERNEL_B,
        "total_tokens": 3 * 1400 + 910,
        "total_cost_usd": pytest.approx(0.04),
        "total_time_seconds": 26.0,  # 27 events, one second apart
        "started_at_unix_s": T0,
        "finish_reason": "iteration budget spent (4 of 4)",
    }


def test_kernelbench_ids_keep_level_and_id() -> None:
    assert problem_fields("L1#23") == {"key": "L1#23", "name": "L1#23", "kernelbench_level": 1, "kernelbench_id": 23}
    assert problem_fields("l2#7") == {"key": "L2#7", "name": "l2#7", "kernelbench_level": 2, "kernelbench_id": 7}
    assert problem_fields("softmax_fp32") == {
        "key": "custom:softmax_fp32", "name": "softmax_fp32", "kernelbench_level": None, "kernelbench_id": None,
    }  # fmt: skip


def test_a_session_recorded_before_prompts_were_kept_exports_null_prompts(tmp_path: Path) -> None:
    record(tmp_path / "s1", STEPS[:2], started_at_unix_s=T0)
    shutil.rmtree(tmp_path / "s1" / "prompts")
    row = build_trace(tmp_path / "s1")
    assert [it["prompt"] for it in row["iterations"]] == [None, None]
    replies = ["reply for one row per program", "reply for two rows per program"]
    assert [it["response"] for it in row["iterations"]] == replies


def test_the_loop_keeps_each_prompt_scrubbed(tmp_path: Path) -> None:
    key = "sk-ant-api03-CANARYcanaryCANARY0001"
    record(tmp_path / "s1", [Step(KERNEL_A, "a", 1.0, prompt=f"use {key} please")], hints=("be quick",))
    assert (tmp_path / "s1" / "prompts" / "iter_0000.md").read_text() == "use [REDACTED:anthropic_key] please"
    assert build_trace(tmp_path / "s1")["iterations"][0]["hints"] == ["be quick"]


def test_an_iteration_redone_after_a_kill_is_traced_as_its_decided_attempt(tmp_path: Path) -> None:
    config = SessionConfig("triton", "human", "full", None, None, None, None)
    store = DirectoryStore.create_at(tmp_path / "s", PROBLEM.name, config)
    sid = store.session_id
    store.append(SessionStarted(sid, 10.0, PROBLEM.name, "/gone/softmax.py", "triton", "human",
                                "cuda:0 (NVIDIA A100)", "NVIDIA A100", config))  # fmt: skip
    store.append(IterationStarted(sid, 11.0, 0, None, "triton", ()))
    store.append(GeneratorDelta(sid, 12.0, 0, "first attempt, killed"))
    store.append(Resumed(sid, 20.0, 0, "resumed after the process was killed: iteration 0 is redone", None))
    store.append(IterationStarted(sid, 21.0, 0, None, "triton", ()))
    store.append(GeneratorDelta(sid, 22.0, 0, "second attempt"))
    kernel = store.write_kernel(0, "second kernel\n")
    store.append(KernelProposed(sid, 23.0, 0, "kernels/iter_0000.py", "redo", "0" * 64))
    store.append(Decision(sid, 25.0, 0, "discard", "not timed", None, None))
    store.append(IterationStarted(sid, 26.0, 1, None, "cuda", ()))  # killed again, undecided: not traced
    row = build_trace(store.path)
    assert kernel.name == "iter_0000.py"
    assert row["iterations"] == [
        {
            "iteration": 0,
            "backend": "triton",
            "intent": "redo",
            "hints": [],
            "prompt": None,
            "response": "second attempt",
            "kernel_code": "second kernel\n",
            "eval_result": None,
            "critic_diagnosis": None,
            "decision": "discard",
            "decision_reason": "not timed",
            "prompt_tokens": None,
            "completion_tokens": None,
            "tokens_used": None,
            "cost_usd": None,
            "latency_seconds": 2.0,
            "wall_seconds": 4.0,
            "started_at_unix_s": 21.0,
        }
    ]
    summary = {k: row[k] for k in ("problem_source", "hardware", "iteration_count", "final_iteration",
                                   "final_speedup", "final_kernel", "total_tokens", "finish_reason")}  # fmt: skip
    assert summary == {
        "problem_source": None,  # the problem file is not there any more
        "hardware": "NVIDIA A100",
        "iteration_count": 1,
        "final_iteration": None,
        "final_speedup": None,
        "final_kernel": None,
        "total_tokens": 0,
        "finish_reason": None,
    }


def test_a_directory_without_a_recorded_start_is_a_store_error(tmp_path: Path) -> None:
    config = SessionConfig("triton", "human", "full", None, None, None, None)
    store = DirectoryStore.create_at(tmp_path / "s", PROBLEM.name, config)
    with pytest.raises(StoreError) as caught:
        build_trace(store.path)
    assert str(caught.value) == f"{store.path} has no session_started event: there is no session to trace in it"
    with pytest.raises(StoreError) as caught:
        build_trace(tmp_path / "nothing")
    assert str(caught.value) == f"no session at {tmp_path / 'nothing'}: list them with `kernel-code sessions`"


@pytest.mark.parametrize(
    ("device", "label", "expected"),
    [
        ("cuda:0 (NVIDIA H200)", "NVIDIA H200", "NVIDIA H200"),
        ("cuda:1 (NVIDIA A100-SXM4-80GB)", "NVIDIA H200", "NVIDIA A100-SXM4-80GB"),
        ("cpu (Triton interpreter)", "NVIDIA H200", "cpu"),
        ("cuda", "NVIDIA H100 SXM", "NVIDIA H100 SXM"),
    ],
)
def test_a_trace_is_filed_under_where_it_ran_not_the_roofline_target(device: str, label: str, expected: str) -> None:
    assert ran_on(device, label) == expected
