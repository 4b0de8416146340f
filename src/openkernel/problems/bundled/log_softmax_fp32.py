"""Row log-softmax over the last dimension, fp32: y = x - max(x) - log(sum(exp(x - max(x)))).

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
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] -> [batch_size, dim]
        return torch.log_softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs() -> list[object]:
    return []
