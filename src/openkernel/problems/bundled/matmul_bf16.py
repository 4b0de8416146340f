"""Plain matrix multiply, bf16 in and out: C = A @ B with A [M, K], B [K, N] (fp32 accumulation).

Compute-bound: 2 * 8192^3 = 1.1 TFLOP on 384 MiB of data at the full size (about 1.4 ms at the
H200's ~790 TFLOP/s bf16 tensor-core rate).
"""

import torch
from torch import nn

# Full size: three 8192 x 8192 bf16 matrices, 128 MiB each.
M = 8192
K = 8192
N = 8192
# CPU-interpreter size: no dimension a multiple of a block, so every mask is exercised.
SMALL_SIZES = {"M": 67, "K": 97, "N": 83}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a: [M, K] bf16, b: [K, N] bf16 -> [M, N] bf16
        return a @ b


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs() -> list[object]:
    return []
