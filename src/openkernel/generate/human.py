"""The human generator: a person edits a kernel file, and each saved change is the next proposal.

On the first proposal the file is created from a template (the reference quoted as comments, and a
``ModelNew`` whose ``forward`` raises until it is written: a template that called the reference's
own ops would be rejected, and should be). Then ``propose`` polls the file's modification time and
content hash until the content differs from what was last proposed, the timeout passes, or ``stop``
says so; a timeout or a stop is a proposal without source, like a model that gave no code.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from openkernel.generate.base import Context, Generator, Proposal

__all__ = ["POLL_S", "HumanGenerator", "template"]

POLL_S = 0.25  # how often the file is looked at (seconds)

_IMPORTS = {
    "triton": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n",
    "cuda": "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n",
}


def template(context: Context) -> str:
    """A starting candidate for ``context``'s problem: compiles, defines ModelNew, computes nothing yet."""
    quoted = "\n".join(f"# {line}".rstrip() for line in context.problem_source.splitlines())
    return (
        f'"""Candidate for {context.problem_name} ({context.backend}): write the kernel, then save.\n\n'
        "ModelNew takes the reference Model's constructor arguments and forward inputs. It must launch a\n"
        'kernel of its own: calling the reference\'s torch ops is rejected by the evaluator.\n"""\n\n'
        f"{_IMPORTS.get(context.backend, _IMPORTS['triton'])}\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, *init_inputs: object) -> None:\n"
        "        super().__init__()\n\n"
        "    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:\n"
        '        raise NotImplementedError("launch your kernel here")\n\n\n'
        f"# The reference, for reading:\n{quoted}\n"
    )


class HumanGenerator(Generator):
    """Proposes ``path``'s content each time a person saves a change to it."""

    name = "human"

    def __init__(
        self,
        path: Path,
        timeout_s: float | None = None,
        stop: Callable[[], bool] = lambda: False,
        poll_s: float = POLL_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.timeout_s = timeout_s  # None: wait as long as it takes
        self.stop, self.poll_s, self.sleep, self.clock = stop, poll_s, sleep, clock
        self._last_sha256: str | None = None  # the content last proposed (or the template written)

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(template(context), encoding="utf-8")
            self._last_sha256 = _sha256(self.path.read_bytes())
            if on_text is not None:
                on_text(f"wrote a template to {self.path}: edit it and save\n")
        deadline = None if self.timeout_s is None else self.clock() + self.timeout_s
        seen: tuple[int, int] | None = None  # (mtime_ns, size) last hashed
        while True:
            stat = self.path.stat() if self.path.exists() else None
            if stat is not None and (stat.st_mtime_ns, stat.st_size) != seen:
                seen = (stat.st_mtime_ns, stat.st_size)
                data = self.path.read_bytes()
                digest = _sha256(data)
                if digest != self._last_sha256:
                    self._last_sha256 = digest
                    source = data.decode("utf-8", errors="replace")
                    if on_text is not None:
                        on_text(f"{self.path} changed: proposing it\n")
                    return Proposal(source, f"human edit of {self.path.name}", "", None, None)
            if self.stop():
                return Proposal(None, "human edit", "", None, "stopped while waiting for an edit")
            if deadline is not None and self.clock() >= deadline:
                error = f"no change to {self.path} within {self.timeout_s:g} s"
                return Proposal(None, "human edit", "", None, error)
            self.sleep(self.poll_s)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
