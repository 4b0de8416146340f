"""Attack: crash the worker with SIGSEGV inside forward (reads address 0 through ctypes). The harness must report a
worker killed by a signal as a runtime error, not hang and not treat the missing result as anything else.
"""
# problem: softmax_fp32
# expect: runtime_error
# reason: signal
# needs: any

import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)  # dereference NULL: SIGSEGV
        return x
