"""Attack: launch a trivial Triton kernel so that "a custom kernel ran" is true, but take the answer from torch.softmax.

Kernel-launch counting alone passes it; tracing the aten ops (aten._softmax) must catch it.
"""
# problem: softmax_fp32
# expect: rejected
# reason: reference's compute
# needs: any

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(scratch_ptr, in_ptr):
    # Copies one element: does no useful work, it only exists to be counted as a launch.
    tl.store(scratch_ptr, tl.load(in_ptr))


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(1, dtype=x.dtype, device=x.device)
        touch_kernel[(1,)](scratch, x)
        return torch.softmax(x, dim=-1)  # the real work is PyTorch's
