"""Attack: the honest kernel, but the row is cast to fp16 before the max/exp/sum/divide and the result cast back
to fp32 (half the bytes in flight in a real fp16 kernel). With inputs of spread ~3 the error is ~1e-3 relative,
far above fp32's 1e-4 tolerance.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: mismatch
# needs: any

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_fp16_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float16)  # the attack: all arithmetic below in half precision
    x = x - tl.max(x, axis=0)
    num = tl.exp(x).to(tl.float16)
    y = (num / tl.sum(num, axis=0)).to(tl.float16)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_fp16_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
