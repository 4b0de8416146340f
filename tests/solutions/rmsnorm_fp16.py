"""Honest Triton solution for rmsnorm_fp16: one program per row, whole row in registers, fp32 math."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_row_kernel(
    out_ptr,  # *fp16, [n_rows, n_cols], row-major, contiguous
    x_ptr,  # *fp16, [n_rows, n_cols], row-major, contiguous
    weight_ptr,  # *fp16, [n_cols]: per-feature gain
    n_cols,  # row length (the normalised dimension)
    eps,  # added to the mean square before the square root
    BLOCK: tl.constexpr,  # power of two >= n_cols: one row fits in one block
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    rrms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rrms * w  # one rounding to the output dtype, as the reference
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim, dtype=torch.float16))  # [dim], as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2)
        block = triton.next_power_of_2(n_cols)
        num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
        rmsnorm_row_kernel[(x2.shape[0],)](
            out, x2, self.weight.contiguous(), n_cols, self.eps, BLOCK=block, num_warps=num_warps
        )
        return out.view(x.shape)
