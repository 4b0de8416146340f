"""Attack: return torch.empty_like(x) without writing it, hoping the caching allocator hands back the block that
just held the reference's output (same size, freed a moment ago). Caught by computing the expected output in
another process and by poisoning fresh/freed memory with NaN.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: mismatch|nan at
# needs: gpu

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(scratch_ptr, in_ptr):
    # One element into a scratch buffer: a counted launch that leaves the output untouched.
    tl.store(scratch_ptr, tl.load(in_ptr))


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)  # whatever that memory held before
        scratch = torch.empty(1, dtype=x.dtype, device=x.device)
        touch_kernel[(1,)](scratch, x)
        return out
