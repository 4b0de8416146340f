"""Finding problems: bundled names, files, folders, KernelBench ids; clear errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from openkernel import BadProblem, ProblemNotFound, bundled_names, load_problem, load_problems
from openkernel.problems import bundled_dir, parse_kernelbench_id

KB_FILE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""


def test_bundled_set_covers_the_required_ops() -> None:
    names = bundled_names()
    assert len(names) >= 12
    for needed in ("softmax_fp32", "log_softmax_fp32", "layernorm_fp32", "matmul_fp32", "attention_fp16"):
        assert needed in names
    dtypes = {n.rsplit("_", 1)[1] for n in names}
    assert {"fp32", "fp16", "bf16"} <= dtypes


def test_every_bundled_problem_declares_a_small_size() -> None:
    problems = [load_problem(n) for n in bundled_names()]
    assert [p.name for p in problems if not p.has_small_size] == []
    assert all(p.source == "bundled" for p in problems)


def test_bundled_name_resolves() -> None:
    p = load_problem("softmax_fp32")
    assert (p.name, p.path, p.source) == ("softmax_fp32", bundled_dir() / "softmax_fp32.py", "bundled")
    assert p.small_sizes == (("batch_size", 64), ("dim", 781))


def test_kernelbench_checkout_and_ids(tmp_path: Path) -> None:
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(KB_FILE)
    (level / "190_Other.py").write_text(KB_FILE)
    assert parse_kernelbench_id("L1#19") == (1, 19)
    assert parse_kernelbench_id("softmax") is None
    p = load_problem("L1#19", kernelbench=tmp_path)
    assert (p.name, p.path.name, p.source, p.small_sizes) == ("L1#19", "19_ReLU.py", "kernelbench", ())
    with pytest.raises(ProblemNotFound, match="no problem 7"):
        load_problem("L1#7", kernelbench=tmp_path)
    with pytest.raises(ProblemNotFound, match="--kernelbench"):
        load_problem("L1#19")


def test_folder_of_problems(tmp_path: Path) -> None:
    (tmp_path / "b_relu.py").write_text(KB_FILE)
    (tmp_path / "a_relu.py").write_text(KB_FILE)
    assert [p.name for p in load_problems(tmp_path)] == ["a_relu", "b_relu"]


def test_contract_violations_say_what_to_add(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef get_inputs():\n    return []\n")
    with pytest.raises(BadProblem, match=r"does not define Model, get_init_inputs"):
        load_problem(bad)
    broken = tmp_path / "broken.py"
    broken.write_text("class Model(:\n")
    with pytest.raises(BadProblem, match="syntax error"):
        load_problem(broken)
    with pytest.raises(ProblemNotFound, match="no problem file or bundled problem named 'nope'"):
        load_problem("nope")
