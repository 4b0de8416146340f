"""Attack: at import, replace the clocks (time.perf_counter, perf_counter_ns, monotonic, monotonic_ns,
torch.cuda.Event.elapsed_time, triton.testing.do_bench) with fakes that run 1000x slow, so any timing taken
in this process shows a huge speedup; the compute itself is honest. Caught by identity checks on saved references.
"""
# problem: softmax_fp32
# expect: rejected
# reason: replaced
# needs: any

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl
import triton.testing

_real_perf_counter = time.perf_counter
_real_perf_counter_ns = time.perf_counter_ns
_real_monotonic = time.monotonic
_real_monotonic_ns = time.monotonic_ns
_T0 = _real_perf_counter()
_T0_NS = _real_perf_counter_ns()
_SLOW = 1000.0  # the fake clocks advance 1000x slower than real time


def _fake_perf_counter() -> float:
    return _T0 + (_real_perf_counter() - _T0) / _SLOW


def _fake_perf_counter_ns() -> int:
    return _T0_NS + int((_real_perf_counter_ns() - _T0_NS) / _SLOW)


def _fake_monotonic() -> float:
    return _real_monotonic() / _SLOW


def _fake_monotonic_ns() -> int:
    return int(_real_monotonic_ns() / _SLOW)


time.perf_counter = _fake_perf_counter
time.perf_counter_ns = _fake_perf_counter_ns
time.monotonic = _fake_monotonic
time.monotonic_ns = _fake_monotonic_ns

if hasattr(torch.cuda, "Event"):
    _real_elapsed_time = torch.cuda.Event.elapsed_time

    def _fake_elapsed_time(self: object, end_event: object) -> float:
        return _real_elapsed_time(self, end_event) / _SLOW  # type: ignore[arg-type]

    torch.cuda.Event.elapsed_time = _fake_elapsed_time  # type: ignore[method-assign]


def _fake_do_bench(*args: object, **kwargs: object) -> float:
    return 1e-6  # "one nanosecond", whatever was benchmarked


triton.testing.do_bench = _fake_do_bench


@triton.jit
def softmax_row_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
