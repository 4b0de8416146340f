"""Layer normalisation over the last dimension with a learnable weight and bias, fp32 (nn.LayerNorm).

y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, statistics per row, biased variance.
weight and bias are re-drawn from randn at construction (nn.LayerNorm's own ones/zeros would let a
kernel that ignores them pass), so each trial's fresh seed gives fresh parameters.

Memory-bound: one read and one write of a 256 MiB matrix at the full size.
"""

import torch
from torch import nn

# Full size: 16384 x 4096 fp32 = 256 MiB in + 256 MiB out, about 8x the H200's 60 MiB L2.
batch_size = 16384
dim = 4096
# CPU-interpreter size: a row length that is no power of two, so the column mask is exercised.
SMALL_SIZES = {"batch_size": 64, "dim": 781}


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-5)  # parameters norm.weight, norm.bias: [dim]
        nn.init.normal_(self.norm.weight)
        nn.init.normal_(self.norm.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> [batch_size, dim]
        return self.norm(x)


def get_inputs() -> list[torch.Tensor]:
    # An offset and a scale, so a kernel that skips the mean or the variance is wrong.
    return [torch.randn(batch_size, dim) * 2.0 + 0.5]


def get_init_inputs() -> list[object]:
    return [dim]
