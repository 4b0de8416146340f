"""Broken file: a Python syntax error below the header (an unclosed parenthesis), so importing it fails; the
verdict must be a compile error that names the syntax error.
"""
# problem: softmax_fp32
# expect: compile_error
# reason: syntax
# needs: any

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1
