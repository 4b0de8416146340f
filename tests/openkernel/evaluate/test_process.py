"""Worker processes: no credentials in their environment, bounded logs, nobody left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import openkernel
from openkernel.evaluate.process import BoundedLog, kill_process_tree, worker_environment


def test_environment_is_allow_listed_and_scrubbed(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-live-abc",
        "ANTHROPIC_API_KEY": "sk-ant-xyz",
        "GITHUB_TOKEN": "ghp_123",
        "AWS_SECRET_ACCESS_KEY": "abc",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCHINDUCTOR_COMPILE_THREADS": "2",  # torch.compile's compile pool, sized by whoever runs many at once
        "TORCHINDUCTOR_CACHE_DIR": "/elsewhere",  # other inductor settings stay out
        "CUDA_AUTH_TOKEN": "leak",  # allow-listed prefix, secret-looking name: dropped
        "TRITON_FOO": "sk-hidden",  # allow-listed name, credential-shaped value: dropped
        "HOME": "/root",
        "RANDOM_VAR": "x",
    }
    env = worker_environment(base, tmp_path / "private", tmp_path / "cache", {"TRITON_INTERPRET": "1"})
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "CUDA_VISIBLE_DEVICES": "0",
        "TORCHINDUCTOR_COMPILE_THREADS": "2",
        "HOME": str(tmp_path / "private"),
        "TMPDIR": str(tmp_path / "private"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPYCACHEPREFIX": str(tmp_path / "cache" / "pycache"),
        "TRITON_CACHE_DIR": str(tmp_path / "cache" / "triton"),
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "cache" / "torch_extensions"),
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": str(Path(openkernel.__file__).resolve().parents[1]),
    }


def test_bounded_log_keeps_head_and_tail() -> None:
    log = BoundedLog(head_bytes=10, tail_bytes=10)
    log.feed(b"0123456789")
    log.feed(b"x" * 1000)
    log.feed(b"abcdefghij")
    assert log.total_bytes == 1020
    assert log.text() == "0123456789\n[... 1000 bytes of output dropped ...]\nabcdefghij"


# A leader that starts a child in a process group of its own (as ninja does with nvcc), which
# starts a grandchild; each writes its pid to a file, then everything sleeps.
_NINJA_LIKE = """
import os, subprocess, sys, time
out = sys.argv[1]
grandchild = "import os, sys, time; open(sys.argv[1] + '/gc', 'w').write(str(os.getpid())); time.sleep(600)"
child = (
    "import os, subprocess, sys, time; open(sys.argv[1] + '/c', 'w').write(str(os.getpid())); "
    f"subprocess.Popen([sys.executable, '-c', {grandchild!r}, sys.argv[1]]); time.sleep(600)"
)
subprocess.Popen([sys.executable, "-c", child, out], process_group=0)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[1][:1] != b"Z"
    except OSError:
        return False


def test_kill_process_tree_reaches_descendants_in_their_own_process_groups(tmp_path: Path) -> None:
    leader = subprocess.Popen([sys.executable, "-c", _NINJA_LIKE, str(tmp_path)], start_new_session=True)
    deadline = time.monotonic() + 30
    while not ((tmp_path / "c").exists() and (tmp_path / "gc").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)  # the pid files are written; let the writes land
    child, grandchild = int((tmp_path / "c").read_text()), int((tmp_path / "gc").read_text())
    assert os.getpgid(child) == child != os.getpgid(leader.pid)  # the child really left the leader's group
    killed = kill_process_tree(leader.pid)
    leader.wait(timeout=10)
    time.sleep(0.2)
    assert (_alive(child), _alive(grandchild)) == (False, False)
    assert len(killed) == 2 and all(sys.executable in cmd for cmd in killed)


_PARENT = """
import sys, time
from pathlib import Path
from openkernel.evaluate.process import WorkerProcess
worker = WorkerProcess("candidate", {"CUDA_VISIBLE_DEVICES": ""}, Path(sys.argv[1]))
worker.channel.send({"kind": "job", "problem": sys.argv[2], "candidate": sys.argv[3], "sizes": [], "device": "cpu",
                     "backend": "triton", "cache_dir": sys.argv[1], "cuda_mode": "compile_only", "build_timeout_s": 60})
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_a_worker_dies_with_its_parent_even_while_it_hangs(tmp_path: Path) -> None:
    # A Ray worker killed mid-session, say: its evaluator's workers must not run on (here, one stuck importing).
    problem = Path(openkernel.__file__).parent / "problems" / "bundled" / "softmax_fp32.py"
    hang = Path(__file__).parents[2] / "kernels" / "hang_import.py"
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(tmp_path), str(problem), str(hang)], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    time.sleep(3)  # the worker is in the candidate's endless import by now
    assert _alive(worker)
    parent.kill()
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaper is left to collect it
