"""Attack (on the harness's plumbing): ~20 MB to stdout and ~20 MB to stderr at import and ~1 MB to each per
forward call, to fill pipes (deadlocking a harness that reads them only at the end) or exhaust memory when captured
unbounded. The compute is honest, so the verdict must still be "correct": output capture has to be drained and bounded.
"""
# problem: softmax_fp32
# expect: correct
# reason:
# needs: any

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

_LINE = "flood " * 170 + "\n"  # ~1 KiB per line
_MIB = _LINE * 1024  # ~1 MiB


def _flood(mib: int) -> None:
    for _ in range(mib):
        sys.stdout.write(_MIB)
        sys.stderr.write(_MIB)
    sys.stdout.flush()
    sys.stderr.flush()


_flood(20)  # at import


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
        _flood(1)  # per call
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
