"""Attack: return torch.empty_like(x) with only the first half of the rows written, hoping the untouched half
already holds the right answer (stale memory); caught by poisoning fresh memory (NaN) and comparing every element.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: mismatch|nan at
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
        x = x.contiguous()
        out = torch.empty_like(x)  # uninitialised: whatever the allocator hands back
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        half = n_rows // 2  # the attack: launch programs for the first half of the rows only
        softmax_row_kernel[(half,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
