"""Evaluator behaviour beyond single attacks: re-measurement, baselines, the test double."""

from __future__ import annotations

from pathlib import Path

from openkernel import EvalConfig, EvalStatus, ScriptedEvaluator, evaluate_candidate, load_problem
from tests.conftest import HAS_GPU, KERNELS, SOLUTIONS

SOFTMAX = SOLUTIONS / "softmax_fp32.py"


def test_a_large_speedup_is_measured_again_in_a_fresh_process() -> None:
    # Any speedup above 0 counts as "large" here, so the second measurement always runs.
    result = evaluate_candidate(load_problem("softmax_fp32"), SOFTMAX, EvalConfig(remeasure_above=0.0))
    assert result.status is EvalStatus.CORRECT
    (warning,) = result.warnings
    assert warning.startswith("speedup above 0x: measured again in a fresh process (")
    assert warning.endswith("the second figure is reported")
    assert result.candidate_timing is not None
    assert result.runtime_ms == result.candidate_timing.median_ms
    # Where the time went, in order; the fresh process's own phases are labelled as the re-measurement.
    # The reference is timed once the trials are done and the GPU is this evaluation's alone.
    own = ["reference", "candidate import", "correctness trials", "reference timing", "timed calls"]
    own += ["checked outputs", "gates and cleanup"]  # the checked calls' outputs travel after the GPU is let go
    again = [f"re-measure: {p}" for p in own[1:] if p != "reference timing"]
    assert list(result.phase_seconds) == (["waiting for the GPU"] if HAS_GPU else []) + own + again
    assert all(seconds >= 0 for seconds in result.phase_seconds.values())
    assert sum(result.phase_seconds.values()) <= result.wall_seconds + 0.01


def test_cpu_timings_are_marked_invalid_with_the_reason() -> None:
    result = evaluate_candidate(load_problem("softmax_fp32"), SOFTMAX)
    if HAS_GPU:
        assert (result.timing_valid, result.timing_note) == (True, None)
        return
    assert result.timing_valid is False
    assert result.timing_note == (
        "no GPU: timings are CPU wall-clock times of the Triton interpreter and say nothing about GPU speed"
    )
    assert result.candidate_timing is not None and result.candidate_timing.method == "wall_clock"
    assert result.candidate_timing.samples == 5
    assert [t.trial for t in result.trials][:5] == [0, 1, 2, 3, 4]
    assert len(result.trials) == 5 + 3  # five trials and three checked timed calls
    assert [c.kernel for c in result.target_compiles] == ["softmax_row_kernel"]
    assert all(c.ok and c.target == "cuda:90" for c in result.target_compiles)


def test_torch_compile_baseline_is_timed_when_asked() -> None:
    config = EvalConfig(compile_baseline=True, samples=3)
    result = evaluate_candidate(load_problem("softmax_fp32"), SOFTMAX, config)
    assert result.status is EvalStatus.CORRECT
    assert result.compile_baseline_runtime_ms is not None and result.compile_baseline_runtime_ms > 0
    assert result.reference_timing is not None and result.reference_timing.samples == 3


def test_scripted_evaluator_returns_results_in_order_and_records_calls() -> None:
    first = evaluate_candidate(load_problem("softmax_fp32"), SOFTMAX, EvalConfig(trials=1, samples=1))
    evaluator = ScriptedEvaluator([first])
    problem = load_problem("softmax_fp32")
    assert evaluator.evaluate(problem, Path("k.py")) is first
    assert evaluator.calls == [(problem, Path("k.py"))]


def test_a_kernel_stopped_in_its_trials_reports_the_trials_phase_it_stopped_in() -> None:
    result = evaluate_candidate(load_problem("softmax_fp32"), KERNELS / "wrong_shape.py")
    assert result.status is EvalStatus.INCORRECT
    # The baseline is still timed (its figure is shown next to a failed kernel), after the candidate stopped.
    own = ["reference", "candidate import", "correctness trials", "gates and cleanup", "reference timing"]
    assert list(result.phase_seconds) == (["waiting for the GPU"] if HAS_GPU else []) + own
    assert result.reference_runtime_ms is not None


REUSED_OUTPUT = '''
import torch
from torch import nn


class Model(nn.Module):
    """ReLU into one output buffer that every call overwrites (a reference may keep its workspace)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        return torch.clamp(x, min=0.0, out=self.out)


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
'''


def test_a_reference_that_reuses_its_output_buffer_is_checked_against_each_calls_own_output(tmp_path: Path) -> None:
    """The checked calls' expected outputs travel after the timed calls: they must be copies taken at the call."""
    reference = tmp_path / "relu_reused_output.py"
    reference.write_text(REUSED_OUTPUT)
    candidate = Path(__file__).parents[2] / "fixtures" / "relu_triton.py"
    result = evaluate_candidate(load_problem(reference), candidate, EvalConfig(samples=8, warmup=1))
    assert (result.status, result.reasons[:1]) == (EvalStatus.CORRECT, ("all checks passed",))
    assert len(result.trials) == 5 + 3  # five trials and three checked timed calls, each compared
