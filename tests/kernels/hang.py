"""Attack: forward never returns (a busy loop), hoping the harness waits forever or reports a partial result.
Caught by a hard wall-clock timeout that kills the worker's process group.
"""
# problem: softmax_fp32
# expect: timeout
# reason: timed out
# needs: any

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:  # spin forever, holding the GIL
            pass
