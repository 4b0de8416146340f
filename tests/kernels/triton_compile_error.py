"""Broken kernel: the file imports fine, but the @triton.jit body calls tl.expf, which does not exist (a CUDA-ism),
so the failure comes when the kernel is compiled at its first launch (CompilationError on GPU, InterpreterError
under TRITON_INTERPRET=1). The verdict must be a compile error that says it came from Triton.
"""
# problem: softmax_fp32
# expect: compile_error
# reason: triton
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
    num = tl.expf(x - tl.max(x, axis=0))  # no such function in triton.language
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
