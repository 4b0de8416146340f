"""The human generator: a template first, then each saved change is a proposal; timeouts and stops are data."""

from __future__ import annotations

import ast
from pathlib import Path

from openkernel.generate.base import Context, Proposal
from openkernel.generate.human import HumanGenerator, template

CONTEXT = Context(0, "softmax_fp32", "class Model:\n    pass\n", "triton", None, None, (), None, None, (), None)


class Ticker:
    """A fake clock that moves one second per sleep, running ``on_sleep`` each time (a person saving)."""

    def __init__(self, on_sleep: list[str | None], path: Path) -> None:
        self.now, self.on_sleep, self.path = 0.0, on_sleep, path

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += 1.0
        text = self.on_sleep.pop(0) if self.on_sleep else None
        if text is not None:
            self.path.write_text(text)


def test_template_is_a_candidate_file_that_computes_nothing_yet() -> None:
    source = template(CONTEXT)
    tree = ast.parse(source)
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["ModelNew"]
    assert "import triton.language as tl" in source
    assert "# class Model:" in source
    assert 'raise NotImplementedError("launch your kernel here")' in source


def test_each_saved_change_is_proposed_once(tmp_path: Path) -> None:
    path = tmp_path / "k" / "kernel.py"
    ticker = Ticker([None, "v1\n"], path)
    texts: list[str] = []
    human = HumanGenerator(path, timeout_s=10, sleep=ticker.sleep, clock=ticker.clock)
    assert human.propose(CONTEXT, texts.append) == Proposal("v1\n", "human edit of kernel.py", "", None, None)
    assert texts == [f"wrote a template to {path}: edit it and save\n", f"{path} changed: proposing it\n"]
    ticker.on_sleep = [None, None, "v22\n"]  # another size: coarse mtimes cannot hide it
    assert human.propose(CONTEXT).source == "v22\n"
    assert ticker.now == 5.0


def test_timeout_and_stop_give_no_source(tmp_path: Path) -> None:
    path = tmp_path / "kernel.py"
    path.write_text("mine\n")  # an existing file is proposed as it is, never overwritten
    ticker = Ticker([], path)
    human = HumanGenerator(path, timeout_s=3, sleep=ticker.sleep, clock=ticker.clock)
    assert human.propose(CONTEXT).source == "mine\n"
    assert human.propose(CONTEXT) == Proposal(None, "human edit", "", None, f"no change to {path} within 3 s")
    stopping = HumanGenerator(path, stop=lambda: True, sleep=ticker.sleep, clock=ticker.clock)
    assert stopping.propose(CONTEXT).source == "mine\n"  # a change is proposed even when stopping
    assert stopping.propose(CONTEXT).error == "stopped while waiting for an edit"
