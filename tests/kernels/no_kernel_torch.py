"""Attack: launch no kernel at all and return PyTorch's own softmax, i.e. the reference's result.

The answer is exactly right, so only the proof that a custom kernel ran can catch it.
"""
# problem: softmax_fp32
# expect: rejected
# reason: no custom kernel
# needs: any

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The reference's own op (aten._softmax); no Triton or CUDA kernel of ours runs.
        return torch.softmax(x, dim=-1)
