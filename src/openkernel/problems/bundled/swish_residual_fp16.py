"""Swish (SiLU) plus a residual, fp16: y = x * sigmoid(x) + residual.

Two same-shape inputs, one output; PyTorch evaluates it in three fp16 kernels (sigmoid, multiply, add),
a fused kernel reads each input once.

Memory-bound: two reads and one write of a 256 MiB matrix at the full size.
"""

import torch
from torch import nn

# Full size: 16384 x 8192 fp16 = 256 MiB per tensor; 512 MiB in + 256 MiB out, over 12x the 60 MiB L2.
batch_size = 16384
dim = 8192
# CPU-interpreter size: 53 * 999 elements is no multiple of any block, so the tail mask is exercised.
SMALL_SIZES = {"batch_size": 53, "dim": 999}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        # x, residual: [batch_size, dim] fp16 -> [batch_size, dim] fp16
        return x * torch.sigmoid(x) + residual


def get_inputs() -> list[torch.Tensor]:
    x = torch.randn(batch_size, dim, dtype=torch.float16) * 2.0
    residual = torch.randn(batch_size, dim, dtype=torch.float16)
    return [x, residual]


def get_init_inputs() -> list[object]:
    return []
