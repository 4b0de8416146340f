"""Plain matrix multiply, fp32: C = A @ B with A [M, K], B [K, N].

The reference must run in true fp32 (TF32 off: torch.backends.cuda.matmul.allow_tf32 = False, the
PyTorch default, which the evaluator sets explicitly). Inputs are scaled by 1/8, so the entries of C
have a standard deviation near 1 at K = 4096: fp32 rounding in a 4096-long dot product then stays
around 1e-6, far inside the 1e-4 tolerance, while TF32 or fp16 inputs (about 1e-3 here) fail it.

Compute-bound: 2 * 4096^3 = 137 GFLOP on 192 MiB of data at the full size (several ms on an H200's
fp32 cores).
"""

import torch
from torch import nn

# Full size: three 4096 x 4096 fp32 matrices, 64 MiB each.
M = 4096
K = 4096
N = 4096
# CPU-interpreter size: no dimension a multiple of a block, so every mask is exercised.
SMALL_SIZES = {"M": 67, "K": 97, "N": 83}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # a: [M, K], b: [K, N] -> [M, N]
        return a @ b


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K) * 0.125, torch.randn(K, N) * 0.125]


def get_init_inputs() -> list[object]:
    return []
