"""Row sum over the last dimension, fp32: y[i] = sum_j x[i, j].

Memory-bound: one read of a 512 MiB matrix at the full size; the output (128 KiB) is negligible.
Zero-mean inputs keep the sums near zero, so the 1e-4 tolerance is mostly absolute and checks the
accumulation order's rounding rather than hiding it under a large relative slack.
"""

import torch
from torch import nn

# Full size: 32768 x 4096 fp32 = 512 MiB in, about 8x the H200's 60 MiB L2; 32768 fp32 out.
batch_size = 32768
dim = 4096
# CPU-interpreter size: a row length that is no power of two, so the column mask is exercised.
SMALL_SIZES = {"batch_size": 67, "dim": 1000}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> [batch_size]
        return torch.sum(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim)]


def get_init_inputs() -> list[object]:
    return []
