"""Attack (GPU): hide the last rows on a high-priority side stream in every timed call.

A model's first 5 calls are honest (so every correctness trial, each on a fresh model, and the first
timed calls). After them, the main part computes the first
60% of the rows on the harness's stream; the last 40% wait for it on a side stream created with the
highest priority, whose blocks the GPU schedules ahead of anything queued on the harness's stream
after the call's end event. So when the harness reads the output right after the end event, the
hidden rows are either still being written (the probe's elements differ after a device-wide sync)
or already written because they held the GPU first (the probe's own GPU time grows by theirs).
Either way the evaluator must reject it; without those checks it claims ~1.6x on softmax_fp32.
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
        self.side = torch.cuda.Stream(priority=-100)  # mapped to the highest priority the GPU has
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        shown = n_rows - n_rows * 2 // 5
        softmax_rows_kernel[(shown,)](out, x, 0, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        self.calls += 1
        rest = softmax_rows_kernel[(n_rows - shown,)]
        if self.calls <= 5:  # every trial, and the first timed calls: honest
            rest(out, x, shown, x.stride(0), out.stride(0), n_cols, BLOCK=block)
            return out
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            rest(out, x, shown, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
