"""Honest control: a Triton softmax wrapped in ordinary torch glue that is not the reference's compute:
x.contiguous(), .reshape/.view to 2-D, torch.empty for the output and out.view_as(x). Must pass (no false alarm
from the aten-op trace).
"""
# problem: softmax_fp32
# expect: correct
# reason:
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


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2d = x.contiguous().reshape(-1, n_cols).view(-1, n_cols)  # any leading dims -> rows
        n_rows = x2d.shape[0]
        out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, x2d, x2d.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out.view_as(x)
