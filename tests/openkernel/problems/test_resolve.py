"""A sweep's PROBLEMS: files, folders, bundled names, KernelBench ids and whole levels, in order, once each."""

from __future__ import annotations

from pathlib import Path

import pytest

from openkernel import BadProblem, ProblemNotFound
from openkernel.problems import bundled_dir, parse_kernelbench_level, resolve_problems
from tests.openkernel.problems.test_loader import KB_FILE


def _checkout(root: Path) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name in ("2_Relu.py", "10_Gelu.py", "1_Matmul.py", "notes.py"):
        (level / name).write_text(KB_FILE)
    return root


def test_levels_ids_folders_files_and_bundled_names_resolve_in_order(tmp_path: Path) -> None:
    kb = _checkout(tmp_path / "kb")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "b_relu.py").write_text(KB_FILE)
    (folder / "a_relu.py").write_text(KB_FILE)
    single = tmp_path / "single_relu.py"
    single.write_text(KB_FILE)
    problems = resolve_problems(["softmax_fp32", "L1", str(folder), single, "L1#2"], kernelbench=kb)
    assert [(p.name, p.source) for p in problems] == [
        ("softmax_fp32", "bundled"),
        ("L1#1", "kernelbench"),  # by id, not by file name: 1, 2, 10; notes.py is no problem of the level
        ("L1#2", "kernelbench"),
        ("L1#10", "kernelbench"),
        ("a_relu", "file"),
        ("b_relu", "file"),
        ("single_relu", "file"),
    ]  # "L1#2" a second time is the same file: kept once
    assert problems[0].path == bundled_dir() / "softmax_fp32.py"
    assert parse_kernelbench_level("l3") == 3
    assert parse_kernelbench_level("L1#3") is None


def test_a_level_without_a_checkout_or_a_name_met_twice_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ProblemNotFound, match=r"L1 is a KernelBench level: pass --kernelbench PATH"):
        resolve_problems(["L1"])
    other = tmp_path / "softmax_fp32.py"
    other.write_text(KB_FILE)
    with pytest.raises(BadProblem, match=r"two problems are named 'softmax_fp32' .*: rename one of the files"):
        resolve_problems(["softmax_fp32", other])
    with pytest.raises(ProblemNotFound, match=r"no problems were named"):
        resolve_problems([])
    with pytest.raises(ProblemNotFound, match=r"is not a KernelBench checkout: no level7/"):
        resolve_problems(["L7"], kernelbench=tmp_path)
