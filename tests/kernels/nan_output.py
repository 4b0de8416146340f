"""Attack (or bug): an honest result with one NaN written at [0, 0] by a Triton kernel; a comparison that ignores
NaN (equal_nan, nan-masking, or NaN-as-wildcard) would pass it. Caught by requiring NaN/Inf positions to match.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: nan
# needs: any

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_row_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Honest Triton softmax over the last dim of a 2-D tensor."""
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
    return out


@triton.jit
def poke_nan_kernel(out_ptr):
    tl.store(out_ptr, float("nan"))  # element [0, 0]


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = softmax(x)
        poke_nan_kernel[(1,)](out)
        return out
