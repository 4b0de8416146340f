"""``deep_profile``: no ncu or GPU is a message, never a crash; a stand-in ncu drives the whole path.

The stand-in is a small Python script named ``ncu`` first on PATH. It answers ``--version``, records
its arguments, and writes the hand-made CSV fixtures where ``--log-file`` says (it never runs the
driver: there is no GPU here). ``gpu_check`` is injected to say a GPU is present.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from openkernel import CandidateNotFound, load_problem
from openkernel.profile.deep import (
    AnalyticProfile,
    DeepProfileConfig,
    DeepProfileResult,
    analytic_profile,
    deep_profile,
    problem_sizes,
)
from openkernel.profile.ncu import (
    NO_GPU_MESSAGE,
    NOT_FOUND_MESSAGE,
    PERMISSION_MESSAGE,
    attach_source,
    metric_names,
    parse_raw_csv,
    parse_source_csv,
    stall_metric,
)
from tests.conftest import ROOT, SOLUTIONS

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CANDIDATE = SOLUTIONS / "softmax_fp32.py"

_FAKE = """#!{python}
import json, subprocess, sys, time
MODE, RECORD, RAW, SOURCE, PIDS = {mode!r}, {record!r}, {raw!r}, {source!r}, {pids!r}
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler")
    print("Copyright (c) 2018-2025 NVIDIA Corporation")
    print("Version 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
with open(RECORD, "a") as f:
    f.write(json.dumps(args) + "\\n")
def opt(name):
    return args[args.index(name) + 1] if name in args else None
def write(text):
    with open(opt("--log-file"), "w") as f:
        f.write(text)
if MODE == "denied":
    write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
          "Counters on the target device 0.\\n")
    sys.exit(1)
if MODE == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(PIDS, "w") as f:
        f.write(str(child.pid))
    time.sleep(600)
if MODE == "reject" and "_gmma_per_issue_active" in (opt("--metrics") or ""):
    write("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio\\n")
    sys.exit(1)
if MODE == "empty":
    write("==PROF== Connected to process 7\\n==WARNING== No kernels were profiled.\\n")
    sys.exit(0)
if "--import" in args:
    write(open(SOURCE).read())
    sys.exit(0)
if opt("--export"):
    open(opt("--export"), "wb").write(b"not a real report")
write(open(RAW).read())
"""


def _fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = "ok") -> tuple[str, Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record, pids = tmp_path / "argv.jsonl", tmp_path / "child.pid"
    script = _FAKE.format(
        python=sys.executable,
        mode=mode,
        record=str(record),
        raw=str(FIXTURES / "raw_base_units.csv"),
        source=str(FIXTURES / "source_cuda_sass.csv"),
        pids=str(pids),
    )
    path = bin_dir / "ncu"
    path.write_text(script)
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return str(path), record, pids


def _calls(record: Path) -> list[list[str]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def _gpu_here() -> None:
    return None


def test_here_a_message_without_ncu_or_a_gpu_and_a_real_profile_with_them(tmp_path: Path) -> None:
    started = time.monotonic()
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, DeepProfileConfig(cache_dir=tmp_path))
    if result.available:  # the GPU machine: a real profile of the honest softmax
        assert "softmax_row_kernel" in [k.kernel_name for k in result.kernels], result.message
        return
    assert result.message in (NOT_FOUND_MESSAGE, NO_GPU_MESSAGE)
    assert (result.kernels, result.command) == ((), ())
    assert time.monotonic() - started < 10


def test_a_missing_candidate_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(CandidateNotFound, match="does not exist"):
        deep_profile(load_problem("softmax_fp32"), tmp_path / "nope.py", DeepProfileConfig(cache_dir=tmp_path))


def test_stand_in_ncu_end_to_end_with_source_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, record, _ = _fake_ncu(tmp_path, monkeypatch)
    config = DeepProfileConfig(source_counters=True, kernel_regex="softmax", launch_count=4, cache_dir=tmp_path / "c")
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, config, gpu_check=_gpu_here)
    expected = attach_source(
        parse_raw_csv((FIXTURES / "raw_base_units.csv").read_text()),
        parse_source_csv((FIXTURES / "source_cuda_sass.csv").read_text()),
    )
    assert result == DeepProfileResult(
        available=True,
        message="profiled 2 kernel launch(es) of softmax_row_kernel, vectorized_elementwise_kernel at size full "
        "with ncu 2025.3.1.0",
        kernels=tuple(expected),
        command=result.command,
        wall_seconds=result.wall_seconds,
    )
    assert [len(k.source_lines) for k in result.kernels] == [6, 0]
    profile_call, source_call = _calls(record)
    assert list(result.command) == [fake, *profile_call]
    assert profile_call[:2] == ["--clock-control", "none"]
    assert profile_call[profile_call.index("--metrics") + 1] == ",".join(metric_names())
    assert profile_call[profile_call.index("--kernel-name") + 1] == "regex:softmax"
    assert profile_call[profile_call.index("--launch-count") + 1] == "4"
    driver = profile_call[profile_call.index(sys.executable) :]
    assert driver == [
        sys.executable,
        "-m",
        "openkernel.profile.ncu_driver",
        "--problem",
        str(load_problem("softmax_fp32").path),
        "--candidate",
        str(CANDIDATE.resolve()),
        "--sizes",
        "[]",  # a deep profile runs on a GPU: the full size
        "--warmup",
        "2",
        "--calls",
        "1",
        "--cache-dir",
        str(tmp_path / "c"),
        "--build-timeout",
        "240.0",
    ]
    report = profile_call[profile_call.index("--export") + 1]
    assert source_call[:2] == ["--import", report]
    assert not Path(report).exists()  # the temporary report went with the private directory


def test_counters_we_may_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_ncu(tmp_path, monkeypatch, "denied")
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, DeepProfileConfig(), gpu_check=_gpu_here)
    assert (result.available, result.message, result.kernels) == (False, PERMISSION_MESSAGE, ())


def test_a_metric_ncu_rejects_is_dropped_and_the_run_repeated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, record, _ = _fake_ncu(tmp_path, monkeypatch, "reject")
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, DeepProfileConfig(), gpu_check=_gpu_here)
    assert len(result.kernels) == 2
    first, second = (call[call.index("--metrics") + 1].split(",") for call in _calls(record))
    assert [m for m in first if m not in second] == [stall_metric("gmma")]


def test_no_kernels_profiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_ncu(tmp_path, monkeypatch, "empty")
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, DeepProfileConfig(), gpu_check=_gpu_here)
    assert (result.available, result.message, result.kernels) == (
        True,
        "ncu profiled no kernels: the candidate launched none, or --kernels matched none",
        (),
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b") ", 1)[1][:1] != b"Z"
    except OSError:
        return False


def test_a_hung_ncu_is_killed_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, pids = _fake_ncu(tmp_path, monkeypatch, "hang")
    started = time.monotonic()
    config = DeepProfileConfig(timeout_s=3)
    result = deep_profile(load_problem("softmax_fp32"), CANDIDATE, config, gpu_check=_gpu_here)
    assert time.monotonic() - started < 30
    assert (result.available, result.message, result.kernels) == (
        True,
        "ncu did not finish within 3 s: profile fewer launches (--launches) or raise the timeout",
        (),
    )
    assert not _alive(int(pids.read_text()))


def test_sizes_follow_the_evaluators_rule() -> None:
    softmax = load_problem("softmax_fp32")
    assert problem_sizes(softmax, "auto", (), on_gpu=True) == ("full", [])
    assert problem_sizes(softmax, "auto", (("dim", 100),), on_gpu=False) == (
        "small dim=100",
        [("batch_size", 64), ("dim", 781), ("dim", 100)],
    )


def test_analytic_profile_without_a_gpu(tmp_path: Path) -> None:
    analytic = analytic_profile(load_problem("softmax_fp32"), cache_dir=tmp_path)
    assert isinstance(analytic, AnalyticProfile)
    assert (analytic.size, analytic.sizes, analytic.hardware) == ("small", (("batch_size", 64), ("dim", 781)), "H200")
    roof = analytic.roofline
    assert (roof.flops, roof.min_bytes, roof.bound_by, roof.bandwidth_source, roof.bottleneck) == (
        5 * 64 * 781,
        2 * 4 * 64 * 781,
        "memory",
        "datasheet",
        None,
    )
