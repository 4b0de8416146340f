"""The parent's comparison: whole verdicts for the cases an engineer would check by hand."""

from __future__ import annotations

import pytest
import torch

from openkernel.evaluate.compare import OutputCheck, Tolerance, check_output, passes, tolerance_for

FP32 = tolerance_for(torch.float32)


def test_tolerances_by_dtype() -> None:
    assert tolerance_for(torch.float32) == Tolerance(1e-4, 1e-4)
    assert tolerance_for(torch.float16) == Tolerance(5e-3, 5e-3)
    assert tolerance_for(torch.bfloat16) == Tolerance(2e-2, 2e-2)
    assert tolerance_for(torch.int64) == Tolerance(0.0, 0.0)
    assert tolerance_for(torch.bfloat16, atol=1e-5) == Tolerance(1e-5, 2e-2)


def test_within_tolerance_passes() -> None:
    e = torch.tensor([1.0, -2.0, 100.0])
    a = e + torch.tensor([5e-5, -5e-5, 5e-3])  # each under atol + rtol * |e|
    got = check_output(e, a, FP32)
    assert (got.passed, got.reason, got.mismatched) == (True, None, 0)


def test_just_outside_tolerance_fails_with_counts() -> None:
    e = torch.zeros(4)
    a = torch.tensor([0.0, 1.5e-4, 0.0, -3e-4])
    got = check_output(e, a, FP32)
    assert got == OutputCheck(
        False,
        "output: mismatch at 2 of 4 elements (max abs error 0.0003, tolerance atol=0.0001 rtol=0.0001)",
        got.max_abs_error,
        got.max_rel_error,
        2,
    )
    assert abs((got.max_abs_error or 0) - 3e-4) < 1e-9


def test_nan_is_never_a_wildcard() -> None:
    e = torch.tensor([1.0, 2.0])
    got = check_output(e, torch.tensor([1.0, float("nan")]), FP32)
    assert (got.passed, got.reason) == (False, "output: NaN at 1 of 2 positions where the reference has none")
    both = torch.tensor([float("nan"), 2.0])
    assert check_output(both, both.clone(), FP32).passed


def test_inf_must_match_in_place_and_sign() -> None:
    e = torch.tensor([float("inf"), 1.0])
    assert check_output(e, e.clone(), FP32).passed
    got = check_output(e, torch.tensor([float("-inf"), 1.0]), FP32)
    assert (got.passed, got.reason) == (False, "output: Inf mismatch at 1 of 2 positions")


def test_shape_and_dtype_must_match() -> None:
    e = torch.zeros(2, 3)
    assert check_output(e, torch.zeros(3, 2), FP32).reason == "output shape [3, 2] != expected [2, 3]"
    assert check_output(e, e.double(), FP32).reason == "output dtype torch.float64 != expected torch.float32"


def test_integers_compare_exactly() -> None:
    e = torch.tensor([1, 2, 3])
    got = check_output(e, torch.tensor([1, 2, 4]), tolerance_for(torch.int64))
    assert (got.passed, got.reason) == (False, "output: 1 of 3 elements differ")


def test_an_error_past_the_first_chunk_is_found_and_counted() -> None:
    # Large outputs are checked in chunks; a single bad element in a later chunk must still fail the check.
    e = torch.linspace(-1.0, 1.0, 3 * (1 << 20) + 5)
    a = e.clone()
    a[2 * (1 << 20) + 7] += 0.5
    got = check_output(e, a, FP32)
    assert (got.passed, got.mismatched) == (False, 1)
    assert got.reason == (
        f"output: mismatch at 1 of {e.numel()} elements (max abs error 0.5, tolerance atol=0.0001 rtol=0.0001)"
    )
    clean = check_output(e, e + 1e-5, FP32)
    assert clean.passed and clean.max_abs_error is not None and abs(clean.max_abs_error - 1e-5) < 1e-6


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.00001])),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1])),
        (torch.tensor([float("nan"), 2.0]), torch.tensor([float("nan"), 2.0])),
        (torch.tensor([float("inf"), 2.0]), torch.tensor([float("inf"), 2.0])),
        (torch.tensor([float("inf"), 2.0]), torch.tensor([float("-inf"), 2.0])),
        (torch.tensor([1.0, 2.0]), torch.tensor([float("nan"), 2.0])),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float16)),
        (torch.tensor([3, 4]), torch.tensor([3, 4])),
    ],
)
def test_passes_agrees_with_check_output(expected: torch.Tensor, actual: torch.Tensor) -> None:
    assert passes(expected, actual, FP32) == check_output(expected, actual, FP32).passed
