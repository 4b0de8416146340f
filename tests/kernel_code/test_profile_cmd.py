"""``kernel-code profile``: without ncu, the reason and the analytic roofline; with a profile, a table per kernel."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from kernel_code import profile_cmd
from openkernel.profile import ncu
from openkernel.profile.deep import DeepProfileResult
from openkernel.profile.ncu import attach_source, parse_raw_csv, parse_source_csv
from tests.conftest import ROOT, SOLUTIONS

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CANDIDATE = str(SOLUTIONS / "softmax_fp32.py")
FLOPS = 5 * 64 * 781  # softmax: 5 FLOP per element at the small size (64 x 781)
BYTES = 2 * 4 * 64 * 781  # read once, written once, fp32


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kernel-code")
    profile_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["profile", *argv])


@pytest.fixture
def no_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ncu anywhere, no cached calibration, and a wide terminal (no wrapped lines)."""
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.usefixtures("no_ncu")
def test_without_ncu_the_reason_then_the_analytic_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    assert profile_cmd.run(_args("softmax_fp32", CANDIDATE)) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    critic = lines.index("Critic: Bottleneck: — · Bandwidth: — · L2 hit: — · Occupancy: — · Headroom: —")
    steps = [line for line in lines[critic + 1 :] if line.startswith("  1. ")]
    assert steps[0].startswith("  1. Cut fixed costs: the whole problem needs 0.0833 us at speed of light")
    assert lines[:critic] == [
        "ncu not found: install Nsight Compute or put it on PATH",
        "analytic roofline of softmax_fp32 (size small: batch_size=64 dim=781) on H200:",
        f"  {FLOPS:,} FLOP · {BYTES:,} B · intensity 0.625 FLOP/B · speed of light 0.08331 us "
        "(memory-bound; datasheet bandwidth, datasheet fp32 rate)",
        f"  {FLOPS:,} FLOP over {BYTES:,} bytes: arithmetic intensity 0.625 FLOP/byte against a ridge point of 14, "
        "so the memory term sets the speed-of-light time (8.331e-05 ms)",
    ]
    assert captured.err == ""


@pytest.mark.usefixtures("no_ncu")
def test_json_is_one_object_with_the_analytic_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert profile_cmd.run(_args("softmax_fp32", CANDIDATE, "--json", "--hardware", "A100-80GB")) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    payload = json.loads(out)
    assert (payload["available"], payload["message"], payload["kernels"], payload["command"]) == (
        False,
        "ncu not found: install Nsight Compute or put it on PATH",
        [],
        [],
    )
    analytic = payload["analytic"]
    assert (analytic["size"], analytic["sizes"], analytic["hardware"]) == (
        "small",
        [["batch_size", 64], ["dim", 781]],
        "A100 80GB",
    )
    assert (analytic["roofline"]["flops"], analytic["roofline"]["min_bytes"]) == (FLOPS, BYTES)


def test_a_missing_candidate_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert profile_cmd.run(_args("softmax_fp32", str(tmp_path / "nope.py"))) == 2
    assert capsys.readouterr().err == f"kernel-code: error: candidate file {tmp_path / 'nope.py'} does not exist\n"


@pytest.mark.parametrize(
    "argv",
    [["--launches", "0"], ["--kernels", "("], ["--set", "dim"], ["--timeout", "-1"], ["--size", "huge"]],
    ids=["launches", "regex", "set", "timeout", "size"],
)
def test_bad_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _args("softmax_fp32", CANDIDATE, *argv)
    assert exit_info.value.code == 2
    assert "kernel-code profile: error: argument --" in capsys.readouterr().err.splitlines()[-1]


def test_a_profile_prints_a_table_per_kernel(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels = attach_source(
        parse_raw_csv((FIXTURES / "raw_base_units.csv").read_text()),
        parse_source_csv((FIXTURES / "source_cuda_sass.csv").read_text()),
    )
    seen: list[Any] = []

    def fake_deep_profile(problem: Any, candidate: Path, config: Any) -> DeepProfileResult:
        seen.append((problem.name, candidate, config.kernel_regex, config.launch_count, config.source_counters))
        return DeepProfileResult(True, "profiled 2 kernel launch(es)", tuple(kernels), ("ncu",), 1.0)

    monkeypatch.setattr(profile_cmd, "deep_profile", fake_deep_profile)
    monkeypatch.setenv("COLUMNS", "200")
    argv = ("softmax_fp32", CANDIDATE, "--kernels", "softmax", "--launches", "3", "--source")
    assert profile_cmd.run(_args(*argv)) == 0
    assert seen == [("softmax_fp32", Path(CANDIDATE), "softmax", 3, True)]
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]  # table padding aside
    assert lines[:15] == [
        "profiled 2 kernel launch(es)",
        "softmax_row_kernel · launch 0 · grid (16384, 1, 1) · block (256, 1, 1)",
        "duration 0.1332 ms",
        "DRAM throughput 87.4%",
        "DRAM bytes 536,936,448 B",
        "L2 hit rate 3.3%",
        "L1 hit rate 0.1%",
        "SM throughput 24.6%",
        "tensor pipe active 0.0%",
        "occupancy achieved 82.3%",
        "occupancy theoretical 100.0%",
        "registers / thread 32",
        "shared memory / block 1,024 B",
        "local (spill) traffic 0 B",
        "top stalls (share of warp states): long_scoreboard 50.0%, lg_throttle 12.5%, short_scoreboard 12.5%",
    ]
    assert "softmax_fp32.py:21" in lines[17] and "8,388,608" in lines[17]  # the heaviest line first
    assert any(line.startswith("vectorized_elementwise_kernel · launch 1") for line in lines)


def test_no_profile_from_a_usable_ncu_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_deep_profile(problem: Any, candidate: Path, config: Any) -> DeepProfileResult:
        return DeepProfileResult(True, "ncu profiled no kernels", (), ("ncu",), 1.0)

    monkeypatch.setattr(profile_cmd, "deep_profile", fake_deep_profile)
    assert profile_cmd.run(_args("softmax_fp32", CANDIDATE)) == 1


@pytest.mark.usefixtures("no_ncu")
def test_ncu_kernel_time_goes_on_the_roofline_and_the_critic_names_the_bottleneck(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels = parse_raw_csv((FIXTURES / "raw_base_units.csv").read_text())
    durations = [k.duration_ms for k in kernels]
    monkeypatch.setattr(
        profile_cmd, "deep_profile", lambda *_: DeepProfileResult(True, "profiled", tuple(kernels), ("ncu",), 1.0)
    )
    assert profile_cmd.run(_args("softmax_fp32", CANDIDATE, "--launches", "3")) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    # One forward's launches (0.1332 ms + the copy kernel) against the full size's 512 MiB, datasheet ceilings.
    assert sum(d or 0 for d in durations) == pytest.approx(0.1356, abs=1e-4)
    assert "roofline with ncu's kernel time 0.1356 ms of softmax_fp32 (size full) on H200:" in lines
    assert "achieved 3.96 TB/s = 82% of the 4.8 TB/s datasheet bandwidth" in lines
    critic = next(line for line in lines if line.startswith("Critic:"))
    assert critic == (
        "Critic: Bottleneck: memory_bound · Bandwidth: 82% of peak · L2 hit: 3% (poor) · Occupancy: 0.82 · "
        "Headroom: ~1.2x"
    )
    # Launches cut off by --launches are not one whole forward: no measured roofline then.
    assert profile_cmd.run(_args("softmax_fp32", CANDIDATE, "--launches", "2")) == 0
    out = capsys.readouterr().out
    assert "ncu's kernel time" not in out and "no GPU timing, so the bottleneck cannot be told" in out
