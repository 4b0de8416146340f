"""Honest control: softmax in two Triton launches. The first walks each row in blocks and writes the row's max and
sum(exp(x - max)) (online softmax) into small scratch buffers from torch.empty; the second normalises. Must pass.
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
def row_stats_kernel(max_ptr, sum_ptr, in_ptr, in_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_max = tl.full([], -float("inf"), tl.float32)
    row_sum = tl.full([], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        # rescale the running sum to the new max, then add this block
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        row_max = new_max
    tl.store(max_ptr + row, row_max)
    tl.store(sum_ptr + row, row_sum)


@triton.jit
def normalise_kernel(out_ptr, in_ptr, max_ptr, sum_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=0.0)
    y = tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        row_max = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        row_sum = torch.empty(n_rows, dtype=torch.float32, device=x.device)
        block = 512  # several blocks per row at both sizes, so the loop really runs
        row_stats_kernel[(n_rows,)](row_max, row_sum, x, x.stride(0), n_cols, BLOCK=block)
        grid = (n_rows, triton.cdiv(n_cols, block))
        normalise_kernel[grid](out, x, row_max, row_sum, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
