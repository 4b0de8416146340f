"""``kernel-code skills``: the listing, the ranked matches, one skill in full, and the errors."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json

import pytest
from rich.console import Console

from kernel_code import skills_cmd
from openkernel.skills import SIGNALS, load_skills


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernel-code")
    sub = parser.add_subparsers(dest="command", required=True)
    skills_cmd.add_parser(sub)
    return parser


def _run(*argv: str) -> tuple[int, list[str]]:
    """Run the command with a wide console; returns the exit code and the rich output's lines, spaces squeezed."""
    buffer = io.StringIO()
    args = _parser().parse_args(["skills", *argv])
    code = skills_cmd.run(args, console=Console(file=buffer, width=250))
    return code, [" ".join(line.split()) for line in buffer.getvalue().splitlines()]


def test_listing_shows_every_skill_with_its_classes() -> None:
    code, lines = _run()
    assert code == 0
    assert lines[0] == f"{len(load_skills())} skills"
    assert lines[1] == "id title bottlenecks op classes hardware"
    assert "online-softmax Online softmax (running max and rescaled sum) memory_bound softmax, attention any" in lines
    assert "hopper-wgmma Warpgroup MMA (wgmma) on Hopper compute_bound matmul, attention, conv sm_90" in lines
    assert len(lines) == len(load_skills()) + 3
    assert lines[-1] == "kernel-code skills --show ID for one in full; --match SPEC to rank them"


def test_match_ranks_with_scores_and_reasons() -> None:
    code, lines = _run("--match", "memory_bound,softmax,long_rows", "--limit", "3")
    assert code == 0
    assert lines == [
        "skills for memory_bound,softmax,long_rows",
        "# score id title because",
        "1 7 online-softmax Online softmax (running max and rescaled sum) "
        "bottleneck memory_bound, signal long_rows, op class softmax",
        "2 7 single-pass-reduction One-pass instead of two-pass reductions "
        "bottleneck memory_bound, signal long_rows, op class softmax",
        "3 5 avoid-wrapper-copies No hidden copies around the kernel bottleneck memory_bound, op class softmax",
    ]


def test_match_with_no_result_says_so() -> None:
    assert _run("--match", "sm_80") == (0, ["no skill matches 'sm_80'"])


def test_match_json_is_one_array(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run("--match", "under_utilised,matmul,small_problem", "--limit", "2", "--json")
    out = capsys.readouterr().out
    assert (code, lines) == (0, [])
    assert out.count("\n") == 1
    because = ["bottleneck under_utilised", "signal small_problem", "op class matmul"]
    assert json.loads(out) == [
        {
            "id": "atomics",
            "title": "Atomics for cross-program accumulation",
            "bottlenecks": ["under_utilised", "latency_bound"],
            "op_classes": ["reduction", "matmul"],
            "hardware": ["any"],
            "score": 7.0,
            "because": because,
        },
        {
            "id": "persistent-kernels",
            "title": "Persistent kernels",
            "bottlenecks": ["under_utilised", "latency_bound"],
            "op_classes": ["matmul", "attention", "elementwise", "norm"],
            "hardware": ["any"],
            "score": 7.0,
            "because": because,
        },
    ]


def test_show_prints_the_skill_and_its_examples() -> None:
    code, lines = _run("--show", "welford")
    assert code == 0
    assert lines[:3] == [
        "Welford's algorithm for mean and variance welford",
        "Compute mean and variance in one numerically stable pass by updating a running mean and sum of "
        "squared deviations.",
        "bottlenecks memory_bound",
    ]
    assert "signals long_rows, low_dram_throughput" in lines
    assert "Triton example" in lines
    assert "def row_mean_var(x_ptr, mean_ptr, var_ptr, n_cols, BLOCK: tl.constexpr):" in lines
    assert "CUDA example" in lines
    assert "__device__ Welford warp_welford(Welford w) {" in lines


def test_show_json_is_the_whole_skill(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--show", "split-k", "--json") == (0, [])
    skill = next(s for s in load_skills() if s.id == "split-k")
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(dataclasses.asdict(skill)))


def test_listing_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--json") == (0, [])
    listed = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in listed] == [s.id for s in load_skills()]
    assert listed[0] == {
        "id": "atomics",
        "title": "Atomics for cross-program accumulation",
        "bottlenecks": ["under_utilised", "latency_bound"],
        "op_classes": ["reduction", "matmul"],
        "hardware": ["any"],
    }


def test_signals_lists_the_vocabulary(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run("--signals")
    assert code == 0
    assert lines[:2] == ["profile signals", "signal meaning"]
    assert lines[2:] == [f"{name} {' '.join(meaning.split())}" for name, meaning in SIGNALS.items()]
    assert _run("--signals", "--json") == (0, [])
    assert json.loads(capsys.readouterr().out) == SIGNALS


def test_unknown_id_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--show", "online-softmx") == (2, [])
    assert capsys.readouterr().err == (
        "kernel-code: error: no skill 'online-softmx': did you mean online-softmax? "
        "run `kernel-code skills` to list them\n"
    )


def test_bad_spec_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--match", "memory_bound,compute_bound") == (2, [])
    assert capsys.readouterr().err == (
        "kernel-code: error: match spec names two bottlenecks (memory_bound and compute_bound): keep one\n"
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--match", "memory_bound", "--show", "welford"], "argument --show: not allowed with argument --match"),
        (["--limit", "0"], "argument --limit: '0' is not a whole number of at least 1"),
        (["--limit", "x"], "argument --limit: 'x' is not a whole number of at least 1"),
        (["--show"], "argument --show: expected one argument"),
    ],
)
def test_argument_errors_exit_2(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        _parser().parse_args(["skills", *argv])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"kernel-code skills: error: {error}"
