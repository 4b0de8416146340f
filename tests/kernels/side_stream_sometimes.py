"""Attack (GPU): hide part of the work on a side stream in most timed calls, but not in all.

A model's first 5 calls compute every row on the harness's stream: so every correctness trial (each
on a fresh model; their outputs are checked for late writes) and the first timed calls of the model
kept for timing. So does every tenth call after them. In the other calls 40% of the
rows are computed on a side stream after the rest, so after the harness's end event; the copy of a
timed call's output is taken after a device-wide sync, so it is complete and correct. The smallest
gap to a device-wide sync over the timed calls is an honest call's, and the hidden rows take about
0.054 ms a call, below the median-call slack: only the output probe (elements read right after each
call's end event, compared after the sync) sees the rows still being written. Without it: a fake
~1.6x on softmax_fp32, above the physics gate.
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
def softmax_rows_kernel(out_ptr, in_ptr, row0, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = row0 + tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.side = torch.cuda.Stream()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        hidden = n_rows * 2 // 5
        main = torch.cuda.current_stream()
        softmax_rows_kernel[(n_rows - hidden,)](out, x, hidden, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        self.calls += 1
        if self.calls <= 5 or self.calls % 10 == 0:  # the trials, and now and then a timed call: honest
            softmax_rows_kernel[(hidden,)](out, x, 0, x.stride(0), out.stride(0), n_cols, BLOCK=block)
            return out
        # The rest start once the timed part is done, so they run after the harness's end event.
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            softmax_rows_kernel[(hidden,)](out, x, 0, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
