"""RMS normalisation over the last dimension with a learnable weight, bf16 (LLaMA-style RMSNorm).

y = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 and rounded to bf16 once at the end.
The weight is drawn from randn (not ones), so a kernel that ignores it gives a wrong answer.

Memory-bound: one read and one write of a 256 MiB matrix at the full size.
"""

import torch
from torch import nn

# Full size: 16384 x 8192 bf16 = 256 MiB in + 256 MiB out, about 8x the H200's 60 MiB L2.
batch_size = 16384
dim = 8192
# CPU-interpreter size: a row length that is no power of two, so the column mask is exercised.
SMALL_SIZES = {"batch_size": 64, "dim": 781}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim, dtype=torch.bfloat16))  # [dim]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, dim] bf16 -> [batch_size, dim] bf16
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16) * 2.0]


def get_init_inputs() -> list[object]:
    return [dim]
