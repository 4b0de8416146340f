"""Honest Triton solution for row_max_fp16: one program per row, a vector of running maxima."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(
    out_ptr,  # *fp16, [n_rows]
    x_ptr,  # *fp16, [n_rows, n_cols], row-major, contiguous
    n_cols,  # row length
    BLOCK: tl.constexpr,  # columns read per step (power of two)
):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)  # running max per lane (exact in fp32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    tl.store(out_ptr + row, tl.max(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        block = min(8192, triton.next_power_of_2(n_cols))
        row_max_kernel[(x2.shape[0],)](out, x2, n_cols, BLOCK=block, num_warps=8 if block >= 4096 else 4)
        return out.view(x.shape[:-1])
