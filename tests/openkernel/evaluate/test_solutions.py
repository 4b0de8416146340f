"""Every bundled problem's honest Triton solution passes the evaluator (no false alarms).

On the CPU the Triton interpreter runs them at the problems' small sizes; bf16 problems need a GPU
(the interpreter stores bf16 as raw 16-bit integers, ENVIRONMENT.md).
"""

from __future__ import annotations

import pytest

from openkernel import EvalConfig, EvalStatus, bundled_names, evaluate_candidate, load_problem
from tests.conftest import HAS_GPU, SOLUTIONS


def _param(name: str) -> object:
    marks = (
        [pytest.mark.skip(reason="bf16 needs a GPU: the interpreter mangles bf16")]
        if (name.endswith("bf16") and not HAS_GPU)
        else []
    )
    return pytest.param(name, id=name, marks=marks)


def test_every_bundled_problem_has_a_solution() -> None:
    assert [n for n in bundled_names() if not (SOLUTIONS / f"{n}.py").is_file()] == []


@pytest.mark.parametrize("name", [_param(n) for n in bundled_names()])
def test_honest_solution_is_correct(name: str) -> None:
    result = evaluate_candidate(load_problem(name), SOLUTIONS / f"{name}.py", EvalConfig(timeout_s=240))
    assert (result.status, result.reasons) == (EvalStatus.CORRECT, ("all checks passed",)), result.log_tail[-2000:]
    assert len([t for t in result.trials if t.trial >= 0]) == 5
    assert all(t.passed for t in result.trials)
    assert result.kernels_launched and all(k.launches > 0 for k in result.kernels_launched)
    assert result.timing_valid is HAS_GPU
    assert result.size == ("full" if HAS_GPU else "small")
    assert [w for w in result.warnings if "weak problem" in w] == []
