"""Row softmax over the last dimension, bf16 in and out (PyTorch computes it in fp32 inside).

Memory-bound: one read and one write of a 256 MiB matrix at the full size.
"""

import torch
from torch import nn

# Full size: 16384 x 8192 bf16 = 256 MiB in + 256 MiB out, about 8x the H200's 60 MiB L2.
batch_size = 16384
dim = 8192
# CPU-interpreter size: a row length that is no power of two, so the column mask is exercised.
SMALL_SIZES = {"batch_size": 64, "dim": 781}

# Tolerance override. Almost every softmax output of an 8192-long row is below bf16's default atol of
# 2e-2, so that atol would accept nearly any answer for them. bf16 rounding is relative (at most
# 2^-8 of the value for one ulp), so the relative 2e-2 alone covers an honest kernel; a tiny atol keeps
# the small probabilities checked.
ATOL = 1e-5
RTOL = 2e-2


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] bf16 -> [batch_size, dim] bf16
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16) * 3.0]


def get_init_inputs() -> list[object]:
    return []
