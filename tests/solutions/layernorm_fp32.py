"""Honest Triton solution for layernorm_fp32: one program per row, the whole row in registers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_row_kernel(
    out_ptr,  # *fp32, [n_rows, n_cols], row-major, contiguous
    x_ptr,  # *fp32, [n_rows, n_cols], row-major, contiguous
    weight_ptr,  # *fp32, [n_cols]: per-feature gain
    bias_ptr,  # *fp32, [n_cols]: per-feature offset
    n_cols,  # row length (the normalised dimension)
    eps,  # added to the variance before the square root
    BLOCK: tl.constexpr,  # power of two >= n_cols: one row fits in one block
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)  # centred; masked lanes stay 0 so they add nothing below
    var = tl.sum(xc * xc, axis=0) / n_cols  # biased variance, as nn.LayerNorm
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    b = tl.load(bias_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, xc * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        # Holds the parameters only (state_dict keys norm.weight, norm.bias, as the reference);
        # the kernel does all the compute.
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        nn.init.normal_(self.norm.weight)
        nn.init.normal_(self.norm.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2)
        block = triton.next_power_of_2(n_cols)
        num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
        layernorm_row_kernel[(x2.shape[0],)](
            out,
            x2,
            self.norm.weight.contiguous(),
            self.norm.bias.contiguous(),
            n_cols,
            self.norm.eps,
            BLOCK=block,
            num_warps=num_warps,
        )
        return out.view(x.shape)
