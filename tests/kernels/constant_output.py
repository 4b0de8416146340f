"""Attack: a degenerate output: a Triton kernel fills every row with the uniform distribution 1/n_cols (rows sum to
1, values in range). Caught because the problem's inputs have real spread (randn * 3), so this is far off.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: mismatch
# needs: any

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_kernel(out_ptr, n_elements, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + value, mask=offs < n_elements)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        block = 1024
        fill_kernel[(triton.cdiv(n, block),)](out, n, 1.0 / x.shape[-1], BLOCK=block)  # input never read
        return out
