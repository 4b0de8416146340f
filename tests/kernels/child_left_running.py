"""Attack: leave processes behind: a `sleep 600` in its own session (Popen start_new_session) and a double-forked,
setsid() grandchild, both outside the worker's process group so killing the group misses them (and both keep the
worker's stdout/stderr and any other inherited fds open). The compute is honest; the harness must find, kill and
report them. Their pids are appended to /tmp/openkernel-zoo-children.pid, one per line, so a test can clean up.
"""
# problem: softmax_fp32
# expect: rejected
# reason: left running|process(es) running
# needs: any

import os
import subprocess
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

PID_FILE = "/tmp/openkernel-zoo-children.pid"
_SPAWNED: list[int] = []  # spawn once per process, however often ModelNew is constructed


def _double_fork_sleeper() -> int:
    """Start a grandchild in a new session that sleeps 600 s; return its pid."""
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # intermediate child: fork the grandchild, report its pid, exit at once
        try:
            os.close(read_fd)
            grandchild = os.fork()
            if grandchild == 0:  # grandchild: leave the session and process group, then linger
                os.close(write_fd)
                os.setsid()
                time.sleep(600)
                os._exit(0)
            os.write(write_fd, str(grandchild).encode())
        finally:
            os._exit(0)  # never return into the parent's Python code
    os.close(write_fd)
    os.waitpid(child, 0)  # reap the intermediate child; the grandchild is re-parented
    with os.fdopen(read_fd) as f:
        return int(f.read())


def _spawn_children() -> None:
    if _SPAWNED:
        return
    popen_child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    grandchild = _double_fork_sleeper()
    _SPAWNED.extend([popen_child.pid, grandchild])
    with open(PID_FILE, "a") as f:
        f.write(f"{popen_child.pid}\n{grandchild}\n")


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
        _spawn_children()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_row_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block)
        return out
