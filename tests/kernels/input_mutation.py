"""Attack: compute the right answer, then zero the input in place, so a reference computed afterwards on the same
tensor would be trivial (uniform) and later calls see garbage; caught by checksumming inputs after every call.
"""
# problem: softmax_fp32
# expect: rejected
# reason: modified its input
# needs: any

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n_rows, n_cols = xc.shape
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, xc, xc.stride(0), out.stride(0), n_cols, BLOCK=block)
        x.zero_()  # the attack: wipe the caller's input in place (the output above is still right)
        return out
