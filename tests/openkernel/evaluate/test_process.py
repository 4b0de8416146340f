"""Worker processes: no credentials in their environment, bounded logs, nobody left behind."""

from __future__ import annotations

from pathlib import Path

import openkernel
from openkernel.evaluate.process import BoundedLog, worker_environment


def test_environment_is_allow_listed_and_scrubbed(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-live-abc",
        "ANTHROPIC_API_KEY": "sk-ant-xyz",
        "GITHUB_TOKEN": "ghp_123",
        "AWS_SECRET_ACCESS_KEY": "abc",
        "CUDA_VISIBLE_DEVICES": "0",
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
        "HOME": str(tmp_path / "private"),
        "TMPDIR": str(tmp_path / "private"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
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
