"""Nsight Compute's CSV into whole values, its command line, and whether ncu is usable here.

The CSV fixtures are hand-made from the documented layout (tests/fixtures/ncu/README.md), not captured.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from openkernel.profile import ncu
from openkernel.profile.ncu import (
    METRICS,
    NO_GPU_MESSAGE,
    NOT_FOUND_MESSAGE,
    PERMISSION_MESSAGE,
    STALL_REASONS,
    KernelProfile,
    NcuStatus,
    SourceBlock,
    SourceLineCounters,
    attach_source,
    build_command,
    diagnose,
    metric_names,
    ncu_available,
    parse_raw_csv,
    parse_source_csv,
    source_command,
    stall_metric,
    unknown_metrics,
)
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CANDIDATE = "/work/candidates/softmax_fp32.py"

SOFTMAX = KernelProfile(
    kernel_name="softmax_row_kernel",
    launch_index=0,
    grid_size="(16384, 1, 1)",
    block_size="(256, 1, 1)",
    dram_throughput_pct=87.42,
    l2_hit_rate_pct=3.27,
    l1_hit_rate_pct=0.05,
    achieved_occupancy_pct=82.35,
    theoretical_occupancy_pct=100.0,
    sm_throughput_pct=24.61,
    tensor_pipe_active_pct=0.0,
    registers_per_thread=32,
    shared_bytes_per_block=1024,
    spill_bytes=0,
    duration_ms=pytest.approx(0.133216),  # 133,216 nsecond
    dram_bytes=536_936_448,
    # ratios 4 + 1 + 1 + 0.5 + 0.5 + 0.5 (selected) + 0.25 + 0.25 = 8 warps per issue-active cycle
    top_stalls=(("long_scoreboard", 50.0), ("lg_throttle", 12.5), ("short_scoreboard", 12.5)),
)
ELEMENTWISE = KernelProfile(
    kernel_name="vectorized_elementwise_kernel",
    launch_index=1,
    grid_size="(132, 1, 1)",
    block_size="(128, 1, 1)",
    dram_throughput_pct=41.2,
    l2_hit_rate_pct=50.0,
    l1_hit_rate_pct=None,  # n/a
    achieved_occupancy_pct=12.5,
    theoretical_occupancy_pct=100.0,
    sm_throughput_pct=5.5,
    tensor_pipe_active_pct=None,  # every tensor candidate n/a
    registers_per_thread=16,
    shared_bytes_per_block=0,
    spill_bytes=256 + 128,
    duration_ms=pytest.approx(0.002432),
    dram_bytes=1_048_576,
    top_stalls=(("drain", 50.0), ("long_scoreboard", 25.0)),  # of 2 + 1 + 1 (selected); n/a left out
)


def _line(line: int, source: str, inst: int, stalls: int, **counts: int) -> SourceLineCounters:
    zero = dict.fromkeys(
        (
            "l2_sectors_global",
            "l2_sectors_global_ideal",
            "l2_sectors_global_excessive",
            "l2_sectors_local",
            "l1_wavefronts_shared",
            "l1_wavefronts_shared_ideal",
        ),
        0,
    )
    return SourceLineCounters(CANDIDATE, line, source, inst, stalls, **{**zero, **counts})


GLOBAL = {"l2_sectors_global": 8_388_608, "l2_sectors_global_ideal": 8_388_608}  # 256 MiB in 32-byte sectors
SHARED = {"l1_wavefronts_shared": 262_144, "l1_wavefronts_shared_ideal": 262_144}
SOFTMAX_LINES = (
    _line(18, "    row = tl.program_id(0)", 131_072, 310),
    _line(
        21,
        '    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))',
        524_288,
        41_250,
        **GLOBAL,
    ),
    _line(
        22, "    x = x - tl.max(x, axis=0)  # subtract the row max so exp never overflows", 1_179_648, 9_870, **SHARED
    ),
    _line(23, "    num = tl.exp(x)", 2_097_152, 3_100),
    _line(24, "    y = num / tl.sum(num, axis=0)", 1_310_720, 8_420, **SHARED),
    _line(25, "    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)", 524_288, 12_030, **GLOBAL),
)


def test_raw_page_parses_into_whole_profiles() -> None:
    assert parse_raw_csv((FIXTURES / "raw_base_units.csv").read_text()) == [SOFTMAX, ELEMENTWISE]


def test_scaled_units_are_normalised_to_the_fields_units() -> None:
    # 536.94 Mbyte, 133.22 usecond, 1.02 Kbyte/block: ncu scales decimally.
    [profile] = parse_raw_csv((FIXTURES / "raw_auto_units.csv").read_text())
    assert (profile.dram_bytes, profile.duration_ms, profile.shared_bytes_per_block) == (
        536_940_000,
        pytest.approx(0.13322),
        1_020,
    )


def test_no_table_means_no_profiles() -> None:
    assert parse_raw_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") == []
    assert parse_raw_csv("") == []


def test_source_page_parses_into_lines_per_launch() -> None:
    assert parse_source_csv((FIXTURES / "source_cuda_sass.csv").read_text()) == [
        SourceBlock("softmax_row_kernel", SOFTMAX_LINES),
        SourceBlock("vectorized_elementwise_kernel", ()),  # no line info: SASS rows only
    ]


def test_a_source_line_without_sums_adds_up_its_instructions() -> None:
    text = (
        '"Kernel Name","k"\n"File Name","k.py"\n'
        '"Line No","Source","Address","Source","Instructions Executed","L2 Theoretical Sectors Global"\n'
        '"7","x = tl.load(p)","-","-","",""\n'
        '"","","0x10","LDG.E R1, [R2]","1,000","4,096"\n'
        '"","","0x20","LDG.E R3, [R4]","24","32"\n'
    )
    [block] = parse_source_csv(text)
    assert block == SourceBlock(
        "k", (SourceLineCounters("k.py", 7, "x = tl.load(p)", 1_024, None, 4_128, None, None, None, None, None),)
    )


def test_source_lines_attach_to_the_launches_in_order() -> None:
    blocks = parse_source_csv((FIXTURES / "source_cuda_sass.csv").read_text())
    kernels = attach_source([SOFTMAX, ELEMENTWISE], blocks)
    assert [k.source_lines for k in kernels] == [SOFTMAX_LINES, ()]
    assert attach_source([ELEMENTWISE], blocks[:1]) == [ELEMENTWISE]  # a name mismatch attaches nothing


def test_metric_names_cover_every_field_and_stall_reason_once() -> None:
    names = metric_names()
    assert len(names) == len(set(names))
    assert set(names) == {m for ms in METRICS.values() for m in ms} | {stall_metric(r) for r in STALL_REASONS}
    # The ones that came back on the H200 (shared/ENVIRONMENT.md) are among them, spelled the same.
    assert {
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__time_duration.sum",
        "dram__bytes.sum",
        "launch__registers_per_thread",
    } <= set(names)


def test_command_never_touches_the_clocks_and_prints_the_raw_page() -> None:
    script = ["python", "-m", "openkernel.profile.ncu_driver"]
    cmd = build_command("/opt/ncu", script, ["a.sum", "b.pct"], None, 5, False, None)
    assert cmd == [
        "/opt/ncu",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--profile-from-start",
        "off",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "function",
        "--metrics",
        "a.sum,b.pct",
        "--launch-count",
        "5",
        *script,
    ]


def test_command_with_a_filter_source_counters_and_a_report(tmp_path: Path) -> None:
    report, log = tmp_path / "r.ncu-rep", tmp_path / "log.csv"
    cmd = build_command("ncu", ["python", "d.py"], ["a.sum"], "softmax", 3, True, report, log_path=log)
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert cmd[cmd.index("--launch-count") + 2 :] == [
        "--kernel-name",
        "regex:softmax",
        "--section",
        "SourceCounters",
        "--import-source",
        "yes",
        "--export",
        str(report),
        "--force-overwrite",
        "--log-file",
        str(log),
        "python",
        "d.py",
    ]
    with pytest.raises(ValueError, match="report_path"):
        build_command("ncu", ["python", "d.py"], ["a.sum"], None, 3, True, None)
    assert source_command("ncu", report) == [
        "ncu",
        "--import",
        str(report),
        "--csv",
        "--page",
        "source",
        "--print-source",
        "cuda,sass",
        "--print-units",
        "base",
        "--print-kernel-base",
        "function",
    ]


def test_ncu_here_says_what_is_missing_and_how_to_fix_it() -> None:
    status = ncu_available()
    if status.available:
        pytest.skip("ncu and a GPU are here")
    assert status.reason in (NOT_FOUND_MESSAGE, NO_GPU_MESSAGE)


def test_ncu_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    assert ncu_available() == NcuStatus(False, None, None, "ncu not found: install Nsight Compute or put it on PATH")


def _fake(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_ncu_found_but_no_gpu(tmp_path: Path) -> None:
    fake = _fake(tmp_path, 'print("NVIDIA (R) Nsight Compute Command Line Profiler")\nprint("Version 2025.3.1.0 (b)")')
    assert ncu_available(lambda: NO_GPU_MESSAGE, fake) == NcuStatus(False, fake, "2025.3.1.0", NO_GPU_MESSAGE)
    assert ncu_available(lambda: None, fake) == NcuStatus(True, fake, "2025.3.1.0", None)


def test_an_ncu_that_does_not_run(tmp_path: Path) -> None:
    fake = _fake(tmp_path, 'print("libfoo.so: cannot open shared object file", file=sys.stderr)\nsys.exit(127)')
    status = ncu_available(lambda: None, fake)
    assert status == NcuStatus(
        False,
        fake,
        None,
        f"ncu at {fake} does not run (libfoo.so: cannot open shared object file): reinstall Nsight Compute",
    )


def test_permission_error_and_rejected_metrics_are_read_from_the_output() -> None:
    denied = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert diagnose(denied) == PERMISSION_MESSAGE
    assert diagnose("==PROF== Disconnected from process 1") is None
    requested = ["a__x.sum", "a__x.sum.per_second", "b__y_per_issue_active.ratio", "c__z.pct"]
    output = "==ERROR== Failed to find metric a__x.sum.\n==ERROR== Unknown metric b__y_per_issue_active\nc__z.pct\n"
    assert unknown_metrics(output, requested) == ("a__x.sum", "b__y_per_issue_active.ratio")
