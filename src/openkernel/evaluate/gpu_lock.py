"""Sharing one GPU between evaluations that run at the same time (threads, processes, sessions).

Correctness trials may share the GPU; timing may not. Each evaluation holds the GPU *shared* while
its workers run trials, and *exclusive* while it times (reference, then candidate). So many
evaluations check at once while exactly one times, and nothing else runs on the GPU meanwhile.

Both holds are ``flock`` locks on one file per visible GPU, so they work across processes (two
``kernel-code`` sessions on one machine) as well as threads. ``flock`` lets new shared holders in
while an exclusive one waits, which would starve timing under load; a second lock, the turnstile,
fixes that: a would-be timer holds the turnstile while it waits, and a newcomer passes the
turnstile before it may share.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

__all__ = ["GpuLock"]


class GpuLock:
    """``shared()`` for trials, ``exclusive()`` for timing, ``idle()`` between, ``release()`` at the end.

    All are no-ops off the GPU.
    """

    def __init__(self, device: str, cache_dir: Path) -> None:
        self.on_gpu = device.startswith("cuda")
        self.waited_s = 0.0  # time spent waiting for the GPU, all holds together
        self.mode: str | None = None
        self._main: int | None = None
        self._gate: int | None = None
        if not self.on_gpu:
            return
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "none"
        folder = cache_dir / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"gpu-{visible}-{device.replace(':', '')}"
        self._main = os.open(folder / f"{stem}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._gate = os.open(folder / f"{stem}.turnstile", os.O_RDWR | os.O_CREAT, 0o600)

    def shared(self) -> None:
        if self._main is None or self._gate is None or self.mode is not None:
            return
        t0 = time.monotonic()
        fcntl.flock(self._gate, fcntl.LOCK_EX)  # wait behind anyone queued to time
        try:
            fcntl.flock(self._main, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.waited_s += time.monotonic() - t0
        self.mode = "shared"

    def exclusive(self) -> None:
        if self._main is None or self._gate is None or self.mode == "exclusive":
            return
        t0 = time.monotonic()
        if self.mode == "shared":
            # Let go first: two sharers that both queue to time would otherwise wait for each other.
            fcntl.flock(self._main, fcntl.LOCK_UN)
        fcntl.flock(self._gate, fcntl.LOCK_EX)  # no new sharers while we wait
        try:
            fcntl.flock(self._main, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.waited_s += time.monotonic() - t0
        self.mode = "exclusive"

    def idle(self) -> None:
        """Let the GPU go for now; ``shared()`` or ``exclusive()`` take it again."""
        if self._main is not None and self.mode is not None:
            fcntl.flock(self._main, fcntl.LOCK_UN)
        self.mode = None

    def release(self) -> None:
        for fd in (self._main, self._gate):
            if fd is not None:
                os.close(fd)  # closing drops any flock held through it
        self._main = self._gate = None
        self.mode = None

    def __enter__(self) -> GpuLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
