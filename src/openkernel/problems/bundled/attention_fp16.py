"""Scaled dot-product attention, fp16, no mask: out = softmax(Q K^T / sqrt(head_dim)) V.

Q, K, V and the output are [batch, heads, seq, head_dim]. A fused (flash-attention style) kernel never
writes the seq x seq score matrix: it streams K and V blocks and keeps a running (online) softmax.

Compute-bound: 4 * 4 * 32 * 4096^2 * 128 = 1.1 TFLOP (two matmuls) on 512 MiB of Q, K, V and output
at the full size.
"""

import torch
import torch.nn.functional as F
from torch import nn

# Full size: each of Q, K, V, out is 4 x 32 x 4096 x 128 fp16 = 128 MiB.
batch_size = 4
num_heads = 32
seq_len = 4096
head_dim = 128
# CPU-interpreter size: a sequence length that is no multiple of a block, so the row and key masks run.
SMALL_SIZES = {"batch_size": 1, "num_heads": 2, "seq_len": 37, "head_dim": 16}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # q, k, v: [batch_size, num_heads, seq_len, head_dim] fp16 -> same shape, fp16
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs() -> list[torch.Tensor]:
    shape = (batch_size, num_heads, seq_len, head_dim)
    # Q and K scaled by 1.4 so the scores have a standard deviation near 2: the attention is peaked
    # enough that the outputs (~0.1) stand well clear of the all-zeros negative control.
    q = torch.randn(shape, dtype=torch.float16) * 1.4
    k = torch.randn(shape, dtype=torch.float16) * 1.4
    v = torch.randn(shape, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs() -> list[object]:
    return []
