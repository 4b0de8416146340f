"""Linear layer with bias then GELU, fp16: y = gelu(x @ W^T + b) (an MLP up-projection).

nn.Linear holds W [out_features, in_features] and b [out_features]; GELU is the exact erf form
(nn.GELU's default). The bias is re-drawn from randn * 0.5: nn.Linear's own bias (uniform within
1/sqrt(in_features) = 0.016) is too small for a kernel that drops it to fail the fp16 tolerance.
A fused kernel applies the bias and GELU to the matmul's accumulator instead of re-reading the output.

Compute-bound: 2 * 8192 * 4096 * 16384 = 1.1 TFLOP on 448 MiB of data at the full size.
"""

import torch
import torch.nn.functional as F
from torch import nn

# Full size: x 8192 x 4096 (64 MiB), W 16384 x 4096 (128 MiB), y 8192 x 16384 (256 MiB), fp16.
batch_size = 8192
in_features = 4096
out_features = 16384
# CPU-interpreter size: no dimension a multiple of a block, so every mask is exercised.
SMALL_SIZES = {"batch_size": 67, "in_features": 97, "out_features": 83}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float16)
        with torch.no_grad():
            self.linear.bias.copy_(torch.randn(out_features, dtype=torch.float16) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_features] fp16 -> [batch_size, out_features] fp16
        return F.gelu(self.linear(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_features, dtype=torch.float16)]


def get_init_inputs() -> list[object]:
    return [in_features, out_features]
