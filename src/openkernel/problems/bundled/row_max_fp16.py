"""Row maximum over the last dimension, fp16: y[i] = max_j x[i, j].

The result is exact (a max never rounds), so any honest kernel matches the reference bit for bit.

Memory-bound: one read of a 512 MiB matrix at the full size; the output (64 KiB) is negligible.
"""

import torch
from torch import nn

# Full size: 32768 x 8192 fp16 = 512 MiB in, about 8x the H200's 60 MiB L2; 32768 fp16 out.
batch_size = 32768
dim = 8192
# CPU-interpreter size: a row length that is no power of two, so the column mask is exercised.
SMALL_SIZES = {"batch_size": 67, "dim": 1000}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] fp16 -> [batch_size] fp16
        return torch.amax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    # Scaled by 4 so the row maxima (~15) sit far from the all-zeros negative control.
    return [torch.randn(batch_size, dim, dtype=torch.float16) * 4.0]


def get_init_inputs() -> list[object]:
    return []
