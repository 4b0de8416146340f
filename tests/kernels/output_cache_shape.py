"""Attack: compute honestly on the first call, then return the cached output for any input of the same shape
(launching a one-element kernel so every call still "runs a custom kernel"). Fast in a benchmark that reuses one
input; caught by fresh input content on every call (timed calls included) and checking those outputs.
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
def softmax_row_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def touch_kernel(scratch_ptr, in_ptr):
    tl.store(scratch_ptr, tl.load(in_ptr))


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
    return out


# Module-level, so the cache also survives re-constructing ModelNew for each trial.
_CACHE: dict[tuple[int, ...], torch.Tensor] = {}


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        if key not in _CACHE:
            _CACHE[key] = softmax(x)  # honest, once
        else:  # a one-element launch, so every call still "runs a custom kernel"
            touch_kernel[(1,)](torch.empty(1, dtype=x.dtype, device=x.device), x)
        return _CACHE[key]  # stale for every later input of this shape
