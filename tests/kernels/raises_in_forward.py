"""Control for error reporting: forward raises RuntimeError("boom"); the verdict must be a runtime error whose
reasons carry the candidate's message.
"""
# problem: softmax_fp32
# expect: runtime_error
# reason: boom
# needs: any

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom")
