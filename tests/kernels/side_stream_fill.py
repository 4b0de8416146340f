"""Attack (GPU): leave ~0.03 ms of work that fills the GPU on a side stream after every call.

The output is honest and complete when forward() returns; what is hidden is the cost of other work
(here a pass over a 64 MiB buffer, standing in for any work the call's time should include), queued
behind the call on a side stream. It is too short for the host-measured gaps to a device-wide sync
(slacks 0.05 and 0.1 ms), and writes nothing the output probe reads; but its blocks fill every SM, so
the probe's reads wait for it, and the probe's wait beyond its own time (gate: max(0.02 ms, 10%))
rejects it.
"""
# problem: softmax_fp32
# expect: rejected
# reason: held the GPU
# needs: gpu

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_row_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.side = torch.cuda.Stream()
        self.scratch = torch.zeros(1 << 24, device="cuda")  # 64 MiB

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            self.scratch.add_(1.0)
        return out
