"""Attack: importing the file never finishes (it sleeps forever at module level), so the harness hangs before it
ever constructs ModelNew. Caught by a hard timeout that covers the import, not only the calls.
"""
# problem: softmax_fp32
# expect: timeout
# reason: timed out
# needs: any

import time

import torch
import torch.nn as nn

while True:  # at import time
    time.sleep(3600)


class ModelNew(nn.Module):  # never reached
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
