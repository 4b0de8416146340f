"""Attack: look for the expected output in the process's memory (gc.get_objects() and the locals of every caller's
frame) and copy it out with a Triton kernel; if nothing is found, return the uniform distribution. Caught by never
holding expected outputs in the candidate's process.
"""
# problem: softmax_fp32
# expect: incorrect
# reason: mismatch|nan at
# needs: any

import gc
import sys
import warnings

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_or_fill_kernel(out_ptr, src_ptr, n_elements, fill, HAS_SRC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    if HAS_SRC:
        val = tl.load(src_ptr + offs, mask=mask)
    else:
        val = tl.zeros([BLOCK], dtype=tl.float32) + fill
    tl.store(out_ptr + offs, val, mask=mask)


def _tensors_in(obj: object, depth: int = 0) -> list[torch.Tensor]:
    """Tensors in obj, looking one or two levels into lists, tuples and dicts."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth >= 2:
        return []
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o, depth + 1)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors_in(o, depth + 1)]
    return []


def _looks_like_softmax(t: torch.Tensor) -> bool:
    with torch.no_grad():
        return bool(torch.isfinite(t).all()) and bool((t >= 0).all()) and bool(((t.sum(-1) - 1).abs() < 1e-3).all())


def _find_expected(x: torch.Tensor) -> torch.Tensor | None:
    found: list[torch.Tensor] = []
    # 1) every caller's frame locals
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            found.extend(_tensors_in(value))
        frame = frame.f_back
    # 2) every object the garbage collector knows about (quietly: some torch objects warn on isinstance)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            found.extend(_tensors_in(obj, depth=1))
    fits = [
        t
        for t in found
        if t is not x
        and type(t) is torch.Tensor
        and t.shape == x.shape
        and t.dtype == x.dtype
        and t.device == x.device
        and t.data_ptr() != x.data_ptr()
        and t.is_contiguous()
    ]
    for t in fits:  # prefer something that already looks like a softmax output
        if _looks_like_softmax(t):
            return t
    return fits[0] if fits else None


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024
        src = _find_expected(x)
        if src is not None:
            copy_or_fill_kernel[(triton.cdiv(n, block),)](out, src, n, 0.0, HAS_SRC=True, BLOCK=block)
        else:  # nothing to steal: a wrong answer (uniform rows)
            copy_or_fill_kernel[(triton.cdiv(n, block),)](out, x, n, 1.0 / x.shape[-1], HAS_SRC=False, BLOCK=block)
        return out
