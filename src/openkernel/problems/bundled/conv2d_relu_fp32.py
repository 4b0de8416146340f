"""2-D convolution (3x3, stride 1, padding 1, with bias) then ReLU, fp32, NCHW layout.

The reference must run in true fp32: cuDNN uses TF32 for fp32 convolutions unless
torch.backends.cudnn.allow_tf32 = False, which the evaluator sets explicitly. TF32 products put
errors up to ~7e-4 into these outputs (std ~0.3), far past the 1e-4 tolerance, so a TF32 reference
would fail an honest fp32 kernel and a TF32 candidate fails against an fp32 reference.

Compute-bound: 2 * (32 * 128 * 128) pixels * 128 out-channels * (128 * 9) = 155 GFLOP on 512 MiB of
activations at the full size (several ms on an H200's fp32 cores).
"""

import torch
from torch import nn

# Full size: input and output 32 x 128 x 128 x 128 fp32 = 256 MiB each; weights 128 x 128 x 3 x 3.
batch_size = 32
in_channels = 128
out_channels = 128
height = 128
width = 128
kernel_size = 3
# CPU-interpreter size: odd channel counts and a non-square, non-power-of-two image exercise the masks.
SMALL_SIZES = {"batch_size": 2, "in_channels": 3, "out_channels": 6, "height": 11, "width": 13}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        # "same" padding for an odd kernel; weight [out, in, k, k] and bias [out] keep nn.Conv2d's init.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [batch_size, in_channels, height, width] -> [batch_size, out_channels, height, width]
        return torch.relu(self.conv(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs() -> list[object]:
    return [in_channels, out_channels, kernel_size]
