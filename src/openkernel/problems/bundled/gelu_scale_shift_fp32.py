"""GELU then a per-feature scale and shift, fp32: y = gelu(x) * scale + shift.

GELU is the exact erf form, gelu(x) = x / 2 * (1 + erf(x / sqrt(2))) (PyTorch's default, not the tanh
approximation). scale and shift are learnable vectors over the last dimension, broadcast over the rows.

Memory-bound: one read and one write of a 256 MiB matrix at the full size (about 20 flops per element).
"""

import torch
import torch.nn.functional as F
from torch import nn

# Full size: 16384 x 4096 fp32 = 256 MiB in + 256 MiB out, about 8x the H200's 60 MiB L2.
batch_size = 16384
dim = 4096
# CPU-interpreter size: non-powers of two, so the kernels' masks are exercised.
SMALL_SIZES = {"batch_size": 61, "dim": 777}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        # randn rather than ones/zeros, so a kernel that drops the scale or the shift gives a wrong answer.
        self.scale = nn.Parameter(torch.randn(dim))  # [dim]
        self.shift = nn.Parameter(torch.randn(dim))  # [dim]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> [batch_size, dim]
        return F.gelu(x) * self.scale + self.shift


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs() -> list[object]:
    return [dim]
