"""Tests for the Triton launch recorder and the GPU-less compile check.

The interpreter must be switched on before any kernel is defined, so everything that launches kernels
runs in one subprocess with TRITON_INTERPRET=1 (a module-scoped fixture: torch and triton are imported
once) and reports JSON; the tests assert on that. Compiled-mode installation (launch hooks) needs no GPU
and is tested in this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from openkernel.evaluate.triton_launches import LaunchRecorder, TritonLaunch, compile_for_target

REPO_ROOT = Path(__file__).resolve().parents[3]
SOFTMAX = REPO_ROOT / "tests" / "solutions" / "softmax_fp32.py"
AUTOTUNED = REPO_ROOT / "tests" / "fixtures" / "autotuned_add.py"
BAD = REPO_ROOT / "tests" / "fixtures" / "bad_triton_kernel.py"

# A kernel that calls two levels of @jit helpers, takes a dtype constexpr and sits under
# triton.heuristics: the compile check must rebuild all of that from the interpreter's objects.
HELPER_MODULE = """
import torch
import triton
import triton.language as tl


@triton.jit
def _square(x):
    return x * x


@triton.jit
def _twice_square(x):
    return 2 * _square(x)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def helper_kernel(out_ptr, in_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(in_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, _twice_square(x).to(OUT_DTYPE), mask=mask)


def launch():
    x = torch.randn(100)
    out = torch.empty(100, dtype=torch.float16)
    helper_kernel[(1,)](out, x, 100, tl.float16)
    return bool(torch.allclose(out.float(), 2 * x * x, atol=1e-2))
"""

# Runs in the subprocess. Reports tallies after each step so each test can assert on one step.
PROBE = textwrap.dedent(
    """
    import dataclasses, importlib.util, json, sys, time
    import torch
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    from openkernel.evaluate.triton_launches import LaunchRecorder, compile_for_target

    paths = json.loads(sys.argv[1])
    originals = {"jit": JITFunction.run, "interp": InterpretedFunction.run, "bench": Autotuner._bench}
    out = {}

    def load(name):
        spec = importlib.util.spec_from_file_location(name, paths[name])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def tallies(rec):
        return {
            "counts": dict(rec.counts), "failures": dict(rec.failures),
            "tuning_counts": dict(rec.tuning_counts), "hook_counts": dict(rec.hook_counts),
            "launches": [launch.to_json() for launch in rec.launches],
            "record_errors": dict(rec.record_errors), "total": rec.total, "mode": rec.mode,
            "intact": rec.is_intact(),
        }

    rec = LaunchRecorder().install()  # before any candidate is imported
    out["patched"] = (
        JITFunction.run is not originals["jit"] and InterpretedFunction.run is not originals["interp"]
    )

    softmax = load("softmax")
    x = torch.randn(64, 781)
    y = softmax.ModelNew()(x)
    softmax.ModelNew()(x)
    out["softmax_correct"] = bool(torch.allclose(y, torch.softmax(x, dim=-1), atol=1e-6))
    out["softmax"] = tallies(rec)

    autotuned = load("autotuned")
    a, b = torch.randn(300), torch.randn(300)
    s = autotuned.ModelNew()(a, b)
    autotuned.ModelNew()(a, b)
    out["autotuned_correct"] = bool(torch.allclose(s, a + b))
    out["autotuned"] = tallies(rec)

    out["helper_correct"] = load("helper").launch()
    out["helper"] = tallies(rec)

    kernel = softmax.softmax_row_kernel
    small = torch.randn(4, 30)
    kernel.run(torch.empty_like(small), small, 30, 30, 30, grid=(4,), warmup=False, BLOCK=32)
    kernel.run(torch.empty_like(small), small, 30, 30, 30, grid=(4,), warmup=False, BLOCK=32)
    misaligned = torch.randn(121)[1:].view(4, 30)  # 4 bytes past a 16-byte boundary
    kernel.run(torch.empty_like(small), misaligned, 30, 30, 30, grid=(4,), warmup=False, BLOCK=32)
    kernel.run(torch.empty_like(small), small, 30, 30, 30, grid=(4,), warmup=True, BLOCK=32)
    out["direct_run"] = tallies(rec)

    bad = load("bad")
    try:
        bad.ModelNew()(torch.randn(300))
        out["bad_error"] = None
    except Exception as exc:
        out["bad_error"] = f"{type(exc).__name__}: {exc}"
    out["bad"] = tallies(rec)

    reports = []
    for launch in rec.launches:
        start = time.perf_counter()
        report = compile_for_target(launch, rec.kernel_for(launch))
        reports.append({**dataclasses.asdict(report), "wall_s": time.perf_counter() - start})
    out["reports"] = reports

    # The interpreter must still work after compiling (the compile swaps triton.language objects).
    out["softmax_after_compile_correct"] = bool(
        torch.allclose(softmax.ModelNew()(x), torch.softmax(x, dim=-1), atol=1e-6)
    )
    out["after_compile"] = tallies(rec)

    out["intact_before_tamper"] = rec.is_intact()
    ours = InterpretedFunction.run
    InterpretedFunction.run = originals["interp"]
    out["intact_after_tamper"] = rec.is_intact()
    InterpretedFunction.run = ours
    out["intact_after_repair"] = rec.is_intact()
    rec.uninstall()
    out["restored"] = (
        JITFunction.run is originals["jit"]
        and InterpretedFunction.run is originals["interp"]
        and Autotuner._bench is originals["bench"]
    )
    out["intact_after_uninstall"] = rec.is_intact()
    softmax.ModelNew()(x)
    out["after_uninstall_total"] = rec.total
    print("RESULT:" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("triton_probe")
    helper = tmp / "helper_kernels.py"
    helper.write_text(HELPER_MODULE)
    paths = {"softmax": str(SOFTMAX), "autotuned": str(AUTOTUNED), "bad": str(BAD), "helper": str(helper)}
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "TRITON_CACHE_DIR": str(tmp / "triton_cache"),
        "PYTHONWARNINGS": "error",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT:")]
    assert len(lines) == 1, done.stdout[-4000:]
    result: dict[str, Any] = json.loads(lines[0].removeprefix("RESULT:"))
    return result


SOFTMAX_LAUNCH = TritonLaunch(
    kernel_name="softmax_row_kernel",
    grid=(64,),
    num_warps=4,
    num_stages=3,
    signature=(
        ("out_ptr", "*fp32"),
        ("in_ptr", "*fp32"),
        ("in_row_stride", "i32"),
        ("out_row_stride", "i32"),
        ("n_cols", "i32"),
        ("BLOCK", "constexpr"),
    ),
    constexprs=(("BLOCK", 1024),),
    divisible_by_16=("out_ptr", "in_ptr"),
)


def test_honest_softmax_is_recorded_twice_with_its_specialisation(probe: dict[str, Any]) -> None:
    assert probe["patched"] is True
    assert probe["softmax_correct"] is True
    assert probe["softmax"] == {
        "counts": {"softmax_row_kernel": 2},
        "failures": {},
        "tuning_counts": {},
        "hook_counts": {},
        "launches": [SOFTMAX_LAUNCH.to_json()],
        "record_errors": {},
        "total": 2,
        "mode": "interpreter",
        "intact": True,
    }
    launch = TritonLaunch.from_json(probe["softmax"]["launches"][0])
    assert launch.signature_map()["in_ptr"] == "*fp32"
    assert launch.constexpr_map() == {"BLOCK": 1024}


def test_autotuned_kernel_counts_each_real_launch_under_its_inner_name(probe: dict[str, Any]) -> None:
    assert probe["autotuned_correct"] is True
    tallies = probe["autotuned"]
    # Two forwards: two launches; the first also benchmarked both configs once each.
    assert tallies["counts"] == {"softmax_row_kernel": 2, "add_kernel": 2}
    assert tallies["tuning_counts"] == {"add_kernel": 2}
    assert tallies["failures"] == {}
    blocks = [
        (launch["grid"], launch["num_warps"], launch["constexprs"])
        for launch in tallies["launches"]
        if launch["kernel_name"] == "add_kernel"
    ]
    assert blocks == [([5], 2, [["BLOCK", 64]]), ([3], 4, [["BLOCK", 128]])]


def test_heuristics_and_helpers_are_recorded_and_compile(probe: dict[str, Any]) -> None:
    assert probe["helper_correct"] is True
    assert probe["helper"]["counts"]["helper_kernel"] == 1
    (launch,) = [launch for launch in probe["helper"]["launches"] if launch["kernel_name"] == "helper_kernel"]
    assert launch["constexprs"] == [["OUT_DTYPE", "fp16"], ["BLOCK", 128]]
    assert launch["dtype_constexprs"] == ["OUT_DTYPE"]
    (report,) = [r for r in probe["reports"] if r["kernel_name"] == "helper_kernel"]
    assert (report["ok"], report["error"]) == (True, None)


def test_direct_run_counts_and_warmup_does_not(probe: dict[str, Any]) -> None:
    tallies = probe["direct_run"]
    assert tallies["counts"]["softmax_row_kernel"] == 5
    # New specialisations get their own record: BLOCK=32 with 16-aligned pointers (the strides, 30,
    # are not multiples of 16), then the same with a misaligned input; the repeat gets none.
    softmax_records = [
        (launch["constexprs"], launch["divisible_by_16"])
        for launch in tallies["launches"]
        if launch["kernel_name"] == "softmax_row_kernel"
    ]
    assert softmax_records == [
        ([["BLOCK", 1024]], ["out_ptr", "in_ptr"]),
        ([["BLOCK", 32]], ["out_ptr", "in_ptr"]),
        ([["BLOCK", 32]], ["out_ptr"]),
    ]


def test_softmax_compiles_for_hopper_without_a_gpu(probe: dict[str, Any]) -> None:
    report = probe["reports"][0]
    assert report["kernel_name"] == "softmax_row_kernel"
    assert (report["target"], report["ok"], report["error"]) == ("cuda:90", True, None)
    # ptxas -v, run by Triton's own compile, gives these without a driver.
    assert report["registers_per_thread"] > 0
    assert (report["spill_store_bytes"], report["spill_load_bytes"]) == (0, 0)
    assert report["shared_bytes"] is not None
    assert report["ptx_lines"] > 100
    assert report["compile_seconds"] < 10
    assert report["wall_s"] < 10


def test_undefined_name_fails_in_the_interpreter_and_in_the_compile(probe: dict[str, Any]) -> None:
    assert "undefined_scale_factor" in probe["bad_error"]
    assert probe["bad"]["failures"] == {"scale_kernel": 1}
    assert "scale_kernel" not in probe["bad"]["counts"]
    (report,) = [r for r in probe["reports"] if r["kernel_name"] == "scale_kernel"]
    assert report["ok"] is False
    assert "undefined_scale_factor" in report["error"]
    assert "\n" not in report["error"]
    assert report["registers_per_thread"] is None


def test_interpreter_still_runs_after_compiling(probe: dict[str, Any]) -> None:
    assert probe["softmax_after_compile_correct"] is True
    assert probe["after_compile"]["counts"]["softmax_row_kernel"] == 6


def test_tampering_is_seen_and_uninstall_restores(probe: dict[str, Any]) -> None:
    assert (probe["intact_before_tamper"], probe["intact_after_tamper"], probe["intact_after_repair"]) == (
        True,
        False,
        True,
    )
    assert probe["restored"] is True
    assert probe["intact_after_uninstall"] is False
    assert probe["after_uninstall_total"] == probe["after_compile"]["total"]


def test_compiled_mode_uses_the_launch_hook_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    import triton
    from triton.compiler.compiler import LazyDict
    from triton.runtime.jit import JITFunction

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    original_run = JITFunction.run
    chain = triton.knobs.runtime.launch_enter_hook
    recorder = LaunchRecorder().install()
    try:
        assert (recorder.mode, recorder.is_intact()) == ("launch-hook", True)
        chain(LazyDict({"name": "some_kernel", "function": None, "stream": 0}))
        assert recorder.hook_counts == {"some_kernel": 1}
        chain.remove(recorder._on_launch)
        assert recorder.is_intact() is False
        chain.add(recorder._on_launch)
        assert recorder.is_intact() is True
    finally:
        recorder.uninstall()
    assert JITFunction.run is original_run
    assert recorder._on_launch not in chain.calls


def test_single_slot_launch_hook_is_chained_and_restored() -> None:
    seen: list[str] = []
    runtime = SimpleNamespace(launch_enter_hook=lambda metadata: seen.append(metadata["name"]))
    previous = runtime.launch_enter_hook
    recorder = LaunchRecorder()
    patch, chain = recorder._launch_hook_site(SimpleNamespace(knobs=SimpleNamespace(runtime=runtime)))
    assert chain is None and patch is not None
    patch.apply()
    runtime.launch_enter_hook({"name": "k"})
    assert (recorder.hook_counts, seen) == ({"k": 1}, ["k"])
    assert patch.intact() is True
    patch.restore()
    assert runtime.launch_enter_hook is previous


def test_compile_for_target_accepts_a_jit_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location("softmax_compiled_mode", SOFTMAX)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = compile_for_target(SOFTMAX_LAUNCH, module.softmax_row_kernel)
    assert (report.ok, report.error, report.target) == (True, None, "cuda:90")
    assert report.registers_per_thread is not None and report.registers_per_thread > 0


def test_unrebuildable_launch_is_a_failed_report_not_an_exception() -> None:
    launch = dataclasses.replace(SOFTMAX_LAUNCH, unrebuildable=("BLOCK",))
    report = compile_for_target(launch, object())
    assert report.ok is False
    assert report.error is not None and "BLOCK" in report.error


def test_launch_json_round_trip_and_validation() -> None:
    assert TritonLaunch.from_json(json.loads(json.dumps(SOFTMAX_LAUNCH.to_json()))) == SOFTMAX_LAUNCH
    with pytest.raises(ValueError, match="grid"):
        TritonLaunch.from_json({**SOFTMAX_LAUNCH.to_json(), "grid": ["64"]})
    with pytest.raises(ValueError, match="kernel_name"):
        TritonLaunch.from_json({**SOFTMAX_LAUNCH.to_json(), "kernel_name": ""})
