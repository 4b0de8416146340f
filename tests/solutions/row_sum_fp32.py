"""Honest Triton solution for row_sum_fp32: one program per row, a vector of partial sums."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(
    out_ptr,  # *fp32, [n_rows]
    x_ptr,  # *fp32, [n_rows, n_cols], row-major, contiguous
    n_cols,  # row length
    BLOCK: tl.constexpr,  # columns read per step (power of two)
):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)  # BLOCK partial sums, combined by a tree at the end
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        block = min(4096, triton.next_power_of_2(n_cols))
        row_sum_kernel[(x2.shape[0],)](out, x2, n_cols, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out.view(x.shape[:-1])
