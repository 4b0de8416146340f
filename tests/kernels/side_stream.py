"""Attack: run the (honest) kernel on a new side CUDA stream and return without synchronising, so a timer that
records events on the harness's stream measures almost nothing. Caught by rejecting work on side streams
(and by a device-wide synchronize before the end event).
"""
# problem: softmax_fp32
# expect: rejected
# reason: side stream
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        self.side.wait_stream(torch.cuda.current_stream())  # see the input the harness wrote
        with torch.cuda.stream(self.side):  # the attack: the work goes to a stream the harness does not time
            softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out  # no wait_stream / synchronize back to the harness's stream
