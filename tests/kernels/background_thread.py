"""Attack: return torch.empty_like(x) at once and let a background thread launch the honest kernel into it 2 ms
later, so the timed call costs nothing. A tiny synchronous launch keeps "a custom kernel ran" true, so it is the
output check (memory poisoned with NaN, outputs copied right after the call) that must catch it, or a check that
the output changed after the call returned (then "rejected").
"""
# problem: softmax_fp32
# expect: incorrect|rejected
# reason: mismatch|nan at|background thread
# needs: gpu

import threading
import time

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


def _late_softmax(out: torch.Tensor, x: torch.Tensor) -> None:
    time.sleep(0.002)  # let forward return (and the timer stop) first
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        scratch = torch.empty(1, dtype=x.dtype, device=x.device)
        touch_kernel[(1,)](scratch, x)  # a real, counted launch inside the call
        threading.Thread(target=_late_softmax, args=(out, x), daemon=True).start()
        return out  # not written yet
