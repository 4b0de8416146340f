"""Attack: print a fake success report to stdout and stderr, write it into every inherited file descriptor 3..20
(where a naive harness's result pipe may be), then exit 0 before the harness can report anything itself. Caught
by a private report channel with a per-run secret, and by treating an exit without a complete report as failure.
Two verdicts are right: "exited" before its report, or "tampered" when the spray hit the real channel's fd.
"""
# problem: softmax_fp32
# expect: runtime_error|rejected
# reason: exited|tampered
# needs: any

import contextlib
import os
import sys

import torch
import torch.nn as nn

FAKE_REPORT = '{"status": "correct", "correct": true, "speedup": 100.0}\n'


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print(FAKE_REPORT, end="", flush=True)
        print(FAKE_REPORT, end="", file=sys.stderr, flush=True)
        data = FAKE_REPORT.encode()
        for fd in range(3, 21):
            with contextlib.suppress(OSError):  # not open or not writable
                os.write(fd, data)
        os._exit(0)  # exit "successfully", skipping the harness's own report
