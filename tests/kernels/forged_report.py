"""Attack: find the worker's report channel in memory (it holds the per-run secret) and send a forged,
authenticated "trial output" whose fields are not what the harness sends, then exit. Caught because the
parent validates every field of every frame: a malformed report is an integrity violation, never a crash.
"""
# problem: softmax_fp32
# expect: rejected
# reason: malformed report
# needs: any

import gc
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from openkernel.evaluate.channel import Channel

        channel = next(o for o in gc.get_objects() if isinstance(o, Channel))
        channel.send(
            {
                "kind": "trial_output",
                "index": 0,
                "structure": "tensor",
                "outputs": [1, 2, 3],  # not descriptions of tensors
                "sendable": True,
                "tensors": [],
                "launches_in_call": 1,
                "aten_ops": [],
                "weights_shared": True,
            }
        )
        os._exit(0)
