"""Worker processes: a scrubbed environment, a private directory, bounded logs, and no survivors.

Each worker runs ``python -m openkernel.evaluate.worker`` in its own process group (and session),
with a private temporary working directory and an environment built from an allow-list, so API
keys and tokens never reach candidate code. Every worker's environment carries a random run
marker; when the worker is done (or timed out) the parent kills its process group and then any
process that still carries the marker, which also finds children that left the group with
``setsid``. Survivors are reported: leaving processes behind is an integrity violation.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from openkernel.evaluate.channel import Channel

__all__ = [
    "LOG_HEAD_BYTES",
    "LOG_TAIL_BYTES",
    "MARKER_VAR",
    "BoundedLog",
    "WorkerProcess",
    "drain_into",
    "kill_process_tree",
    "kill_tree",
    "worker_environment",
]

LOG_HEAD_BYTES = 8 * 1024
LOG_TAIL_BYTES = 24 * 1024
MARKER_VAR = "OPENKERNEL_WORKER_RUN"  # every isolated process carries it, with a per-run value

# Variables a worker may inherit. Everything else is dropped; anything that looks like a
# credential is dropped even when allow-listed.
_ALLOWED = re.compile(
    r"^(PATH|LANG|LANGUAGE|LC_[A-Z]+|TZ|USER|LOGNAME|SHELL|LD_LIBRARY_PATH|PYTHONPATH|PYTHONHASHSEED"
    r"|CUDA_[A-Z_]+|NVIDIA_[A-Z_]+|TORCH_CUDA_ARCH_LIST|CUDA_HOME|CUDA_PATH|NCCL_[A-Z_]+|NVSHMEM_[A-Z_]+"
    r"|TORCH_SYMM_MEM_DISABLE_MULTICAST|OMP_NUM_THREADS|MKL_NUM_THREADS|OPENBLAS_[A-Z_]+|CC|CXX|MAX_JOBS"
    r"|TRITON_[A-Z_]+|PYTORCH_[A-Z_]+|TORCHINDUCTOR_COMPILE_THREADS|OPENKERNEL_PROFILE_WORKERS)$"
)
_SECRETISH = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^(sk-|sk_|ghp_|gho_|github_pat_|xox[abp]-|AKIA|hf_|Bearer\s)")


def worker_environment(
    base: dict[str, str], private_dir: Path, cache_dir: Path, extra: dict[str, str]
) -> dict[str, str]:
    """The environment of a worker: allow-listed, no credentials, a private home and temp dir."""
    env = {
        k: v for k, v in base.items() if _ALLOWED.match(k) and not _SECRETISH.search(k) and not _SECRET_VALUE.match(v)
    }
    env.update(
        {
            "HOME": str(private_dir),
            "TMPDIR": str(private_dir),
            "PYTHONUNBUFFERED": "1",
            # Compiled bytecode goes to the cache, never next to a candidate's (or the library's) files;
            # without it every worker recompiled ~800 of torch's modules where no .pyc was installed (2.5 s).
            "PYTHONPYCACHEPREFIX": str(cache_dir / "pycache"),
            "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "TORCH_EXTENSIONS_DIR": str(cache_dir / "torch_extensions"),
        }
    )
    # The worker must run this very openkernel, wherever it was imported from (a venv, or src/).
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class BoundedLog:
    """Keeps the first and last bytes of a stream and counts the rest (an output flood costs nothing)."""

    def __init__(self, head_bytes: int = LOG_HEAD_BYTES, tail_bytes: int = LOG_TAIL_BYTES) -> None:
        self._head = bytearray()
        self._tail = bytearray()
        self._head_max = head_bytes
        self._tail_max = tail_bytes
        self.total_bytes = 0
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            self.total_bytes += len(data)
            room = self._head_max - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                self._tail += data
                if len(self._tail) > self._tail_max:
                    del self._tail[: len(self._tail) - self._tail_max]

    def text(self) -> str:
        with self._lock:
            kept = len(self._head) + len(self._tail)
            dropped = self.total_bytes - kept
            head = self._head.decode("utf-8", "replace")
            tail = self._tail.decode("utf-8", "replace")
        if dropped > 0:
            return f"{head}\n[... {dropped} bytes of output dropped ...]\n{tail}"
        return head + tail


@dataclass(frozen=True)
class ExitInfo:
    returncode: int | None  # None: still running when we gave up on it
    signal_name: str | None  # "SIGSEGV" when killed by a signal
    killed_by_us: bool
    survivors: tuple[str, ...]  # command lines of processes found alive after the worker ended


_F_SETPIPE_SZ = 1031  # Linux fcntl: set a pipe's capacity
_PIPE_BYTES = 1 << 20  # the unprivileged maximum by default (/proc/sys/fs/pipe-max-size)


def _widen_pipe(fd: int) -> None:
    """Raise the pipe's capacity from 64 KiB to 1 MiB: 16x fewer wake-ups per output sent."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)


class WorkerProcess:
    """One worker: start it, talk to it over a :class:`Channel`, and make sure it is gone after."""

    def __init__(self, role: str, extra_env: dict[str, str], cache_dir: Path) -> None:
        self.role = role
        self._marker = secrets.token_hex(16)
        self._dir = Path(tempfile.mkdtemp(prefix=f"openkernel-{role}-"))
        self._secret = secrets.token_bytes(32)
        self.log = BoundedLog()
        cache_dir.mkdir(parents=True, exist_ok=True)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        _widen_pipe(from_worker_r)  # outputs of hundreds of MiB come this way
        env = worker_environment(dict(os.environ), self._dir, cache_dir, {**extra_env, MARKER_VAR: self._marker})
        cmd = [
            sys.executable,
            "-m",
            "openkernel.evaluate.worker",
            role,
            "--rfd",
            str(to_worker_r),
            "--wfd",
            str(from_worker_w),
            "--parent",
            str(os.getpid()),
        ]
        self._proc = subprocess.Popen(
            cmd,
            cwd=self._dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(to_worker_r, from_worker_w),
            start_new_session=True,  # its own session and process group: killable as a whole
        )
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._reader = drain_into(self._proc, self.log, f"{role}-log")
        self.channel = Channel(from_worker_r, to_worker_w, self._secret)
        os.write(to_worker_w, self._secret)
        self._fds = (from_worker_r, to_worker_w)
        self._exit: ExitInfo | None = None
        self._tree: list[int] = []

    @property
    def pid(self) -> int:
        return self._proc.pid

    def snapshot_descendants(self) -> None:
        """Remember the worker's descendants now, while it is alive and holds them as its children."""
        self._tree = _descendants(self._proc.pid)

    def finish(self, grace_s: float = 5.0, kill: bool = False) -> ExitInfo:
        """Wait for the worker to exit (or kill it), then kill whatever it left behind."""
        if self._exit is not None:
            return self._exit
        killed = False
        if kill:
            killed = self._proc.poll() is None
        else:
            try:
                self._proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                killed = True
        # Descendants that left the process group (setsid) and dropped the marker (a cleared
        # environment) are still the worker's descendants while it lives: find them first.
        survivors = kill_tree(self._proc, self._marker, self._tree)
        self._reader.join(timeout=2)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._dir, ignore_errors=True)
        rc = self._proc.returncode
        sig = signal.Signals(-rc).name if rc is not None and rc < 0 else None
        self._exit = ExitInfo(returncode=rc, signal_name=sig, killed_by_us=killed, survivors=survivors)
        return self._exit

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.finish(kill=True)


def drain_into(proc: subprocess.Popen[bytes], log: BoundedLog, name: str) -> threading.Thread:
    """Read ``proc``'s stdout into ``log`` on a daemon thread (started), so the pipe never fills."""

    def drain() -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            log.feed(chunk)

    reader = threading.Thread(target=drain, name=name, daemon=True)
    reader.start()
    return reader


def kill_tree(proc: subprocess.Popen[bytes], marker: str, known: Sequence[int] = ()) -> tuple[str, ...]:
    """Kill ``proc``'s process group and everything it left behind; return the survivors' command lines.

    Survivors are processes other than ``proc`` that were still alive: descendants listed now or in
    ``known`` (listed earlier, while they were still ``proc``'s children), and any process whose
    environment carries ``marker``. ``proc`` must have been started in its own session.
    """
    # Descendants that left the process group (setsid) and dropped the marker (a cleared
    # environment) are still the worker's descendants while it lives: find them first.
    tree = sorted(set(known) | set(_descendants(proc.pid)))
    _killpg(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL does not fail; belt and braces
        proc.wait(timeout=10)
    return _kill_pids(tree) + _kill_marked(marker)


def kill_process_tree(root: int) -> tuple[str, ...]:
    """SIGKILL ``root``, its process group and every descendant, also those in process groups of their own.

    ninja starts each command (nvcc, and nvcc's cicc and ptxas) in a process group of its own, so
    killing the group of the build's leader would orphan them. The tree is frozen first (SIGSTOP,
    repeated until no new descendant appears), so nothing can fork away while it is being listed.
    """
    frozen: list[int] = []  # parents before their children
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(root, signal.SIGSTOP)
    while new := [pid for pid in _descendants(root) if pid not in frozen]:
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        frozen.extend(new)
    # Deepest first, the root last: when a process dies, the kernel sends SIGHUP to its stopped,
    # orphaned children's process group, and those would die unreported.
    killed = _kill_pids(frozen[::-1])
    _killpg(root)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(root, signal.SIGKILL)
    return killed


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) for every process we can read."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry.name)] = (int(fields[1]), fields[0].decode())
    return table


def _descendants(root: int) -> list[int]:
    """Every live process whose chain of parents leads to ``root`` (``root`` itself excluded)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, state) in table.items():
        if state != "Z":
            children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _kill_pids(pids: list[int]) -> tuple[str, ...]:
    """SIGKILL the given processes that are still alive; return their command lines."""
    killed = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b") ", 1)[1][:1] == b"Z":
                    continue  # already dead, waiting to be reaped
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
        killed.append(cmd or f"pid {pid}")
    return tuple(killed)


def _kill_marked(marker: str) -> tuple[str, ...]:
    """SIGKILL every live process whose environment carries ``marker``; return their command lines.

    Loops until a scan finds none, because a survivor can fork while we look.
    """
    needle = f"{MARKER_VAR}={marker}".encode()
    found: list[str] = []
    for _ in range(20):
        hits = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle not in f.read():
                        continue
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                continue
            hits.append((int(entry.name), cmd))
        if not hits:
            break
        for pid, cmd in hits:
            try:
                os.kill(pid, signal.SIGKILL)
                found.append(cmd or f"pid {pid}")
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return tuple(found)
