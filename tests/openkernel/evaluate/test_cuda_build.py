"""Real nvcc builds and compile checks of load_inline candidates (no mocks).

The honest candidate's compile check takes one to three minutes on a two-core machine (torch's
headers are heavy), so it runs once per session in a module-scoped fixture that the tests share.
The "build" mode tests need a CUDA torch and a GPU and are skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import pickle
import shutil
import time
import warnings
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.utils.cpp_extension

from openkernel import EvalConfig, EvalStatus, evaluate_candidate, load_problem
from openkernel.evaluate.cuda_build import (
    CompileCheckUnavailable,
    CompiledNotRun,
    CudaBuildError,
    CudaBuildReport,
    KernelResources,
    Mode,
    intercept_load_inline,
    parse_ptxas_verbose,
    source_hash,
)

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit) on PATH")

TESTS = Path(__file__).parents[2]
HONEST = TESTS / "solutions" / "softmax_fp32_cuda.py"
BROKEN = TESTS / "kernels" / "cuda_compile_error.py"
CUDA_INCLUDE = Path("/usr/local/cuda/include")
needs_gpu = pytest.mark.skipif(
    torch.version.cuda is None or not torch.cuda.is_available(), reason="needs a CUDA torch and a GPU"
)

_imports = 0


def import_candidate(
    path: Path, cache_root: Path, mode: Mode, timeout_s: float
) -> tuple[ModuleType | Exception, list[CudaBuildReport]]:
    """Import a candidate file as the worker does; return the module or what its import raised."""
    global _imports  # noqa: PLW0603 - a fresh module name per import
    _imports += 1
    spec = importlib.util.spec_from_file_location(f"candidate_{_imports}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with intercept_load_inline(cache_root, mode, timeout_s) as reports:
        try:
            spec.loader.exec_module(module)
        except (CompiledNotRun, CudaBuildError) as raised:
            return raised, reports
    return module, reports


def write_candidate(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "candidate.py"
    path.write_text("from torch.utils.cpp_extension import load_inline\n" + body)
    return path


def processes_in(directory: Path) -> list[int]:
    """Processes whose working directory is `directory` (ninja and nvcc run in the build directory)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "cwd")) == directory:
                    pids.append(int(proc.name))
    return pids


def absent_here(header: str) -> bool:
    roots = [*map(Path, torch.utils.cpp_extension.include_paths()), CUDA_INCLUDE]
    return not any((root / header).exists() for root in roots)


STAND_INS = (
    "c10/cuda/impl/cuda_cmake_macros.h",
    "cublas_v2.h",
    "cublasLt.h",
    "cusparse.h",
    "cusolverDn.h",
    "cusolver_common.h",
)


@pytest.fixture(scope="module")
def honest_check(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, ModuleType | Exception, list[CudaBuildReport]]:
    # Laid out as the evaluator lays out its cache (<cache_dir>/cuda_build), so the evaluator test
    # below reuses this check instead of compiling for another two minutes.
    cache_root = tmp_path_factory.mktemp("openkernel_cache") / "cuda_build"
    raised, reports = import_candidate(HONEST, cache_root, "compile_only", timeout_s=900)
    return cache_root, raised, reports


def test_compile_only_honest_candidate_compiles_and_is_not_run(
    honest_check: tuple[Path, ModuleType | Exception, list[CudaBuildReport]],
) -> None:
    cache_root, raised, reports = honest_check
    assert type(raised) is CompiledNotRun
    (report,) = reports
    assert raised.report == report
    kernel = KernelResources(
        name="(anonymous namespace)::softmax_rows_kernel(float const*, float*, long)",
        arch="sm_90",
        registers_per_thread=None,  # depends on the nvcc version: checked below
        shared_bytes=128,  # float partials[32]
        spill_stores_bytes=0,
        spill_loads_bytes=0,
        stack_frame_bytes=0,
    )
    assert [dataclasses.replace(k, registers_per_thread=None) for k in report.kernels] == [kernel]
    assert report.kernels[0].registers_per_thread is not None
    assert report.kernels[0].registers_per_thread > 0
    stand_ins = {header for header in STAND_INS if absent_here(header)}
    assert set(report.stand_in_headers) == stand_ins
    expected = dataclasses.replace(
        report,
        name="softmax_fp32_cuda",
        mode="compile_only",
        compiled=True,
        ran=False,
        cached=False,
        build_dir=str(cache_root / f"softmax_fp32_cuda-{report.source_hash}"),
        error=None,
    )
    assert report == expected
    note = f" (with stand-ins for headers absent here: {', '.join(report.stand_in_headers)})"
    assert str(raised) == f"compiled with nvcc for sm_90{note if stand_ins else ''}; not run (no GPU)"
    assert len(report.compiler_output_tail) <= 4000
    assert pickle.loads(pickle.dumps(raised)).report == report  # the worker may send it across a pipe


def test_compile_only_reuses_a_passed_check(
    honest_check: tuple[Path, ModuleType | Exception, list[CudaBuildReport]],
) -> None:
    cache_root, _, (first,) = honest_check
    start = time.monotonic()
    raised, (again,) = import_candidate(HONEST, cache_root, "compile_only", timeout_s=900)
    assert time.monotonic() - start < 10
    assert type(raised) is CompiledNotRun
    assert again == dataclasses.replace(first, cached=True, build_seconds=0.0)


def test_compile_only_broken_candidate_is_a_compile_error(tmp_path: Path) -> None:
    raised, (report,) = import_candidate(BROKEN, tmp_path, "compile_only", timeout_s=900)
    assert type(raised) is CudaBuildError
    assert report.error == 'cuda.cu(12): error: expected a ";"'  # cuda.cu: torch's 3 include lines on top
    assert str(raised) == report.error
    assert (report.compiled, report.ran, report.kernels) == (False, False, ())
    assert 'cuda.cu(12): error: expected a ";"' in report.compiler_output_tail


def test_timeout_kills_the_compilers(tmp_path: Path) -> None:
    start = time.monotonic()
    raised, (report,) = import_candidate(BROKEN, tmp_path, "compile_only", timeout_s=0.5)
    assert time.monotonic() - start < 10
    assert type(raised) is CudaBuildError
    assert report.error == "compile timed out after 0.5 s"
    assert processes_in(Path(report.build_dir)) == []


@pytest.mark.skipif(not absent_here("curand_kernel.h"), reason="this machine has cuRAND's headers")
def test_a_header_this_machine_lacks_is_not_checked_rather_than_an_error(tmp_path: Path) -> None:
    candidate = write_candidate(
        tmp_path,
        'ext = load_inline(name="uses_curand", cpp_sources="int f();", no_implicit_headers=True,\n'
        '                  cuda_sources="#include <curand_kernel.h>\\nint f() { return 0; }\\n")\n',
    )
    raised, (report,) = import_candidate(candidate, tmp_path / "cache", "compile_only", timeout_s=120)
    assert type(raised) is CompileCheckUnavailable
    assert isinstance(raised, CompiledNotRun)  # a worker that knows only CompiledNotRun says "not run"
    assert report.error == (
        "not compile-checked: the CUDA toolkit here has no <curand_kernel.h>; "
        "first error: cuda.cu:1:10: fatal error: curand_kernel.h: No such file or directory"
    )
    assert str(raised) == f"{report.error}; not run (no GPU)"
    assert report.compiled is False


@pytest.mark.skipif(not absent_here("cublas_v2.h"), reason="this machine has cuBLAS's headers")
def test_calling_a_library_behind_a_stand_in_is_not_checked(tmp_path: Path) -> None:
    candidate = write_candidate(
        tmp_path,
        'ext = load_inline(name="uses_cublas", cpp_sources="int f();", no_implicit_headers=True,\n'
        '                  cuda_sources="#include <cublas_v2.h>\\n"\n'
        '                  "int f() { cublasHandle_t h; return (int)cublasCreate(&h); }\\n")\n',
    )
    raised, (report,) = import_candidate(candidate, tmp_path / "cache", "compile_only", timeout_s=120)
    assert type(raised) is CompileCheckUnavailable
    assert report.error == (
        "not compile-checked: it calls cuBLAS/cuSPARSE/cuSOLVER, whose headers this machine lacks; "
        'first error: cuda.cu(2): error: identifier "cublasCreate" is undefined'
    )


@pytest.mark.skipif(torch.version.cuda is not None, reason="a CUDA torch's load_inline would build")
@pytest.mark.parametrize(
    "options",
    [
        {"functions": ["f"]},
        {"functions": {"f": "doc of f"}, "with_pytorch_error_handling": False},
        {"functions": None, "no_implicit_headers": True},
    ],
)
def test_sources_are_written_as_load_inline_writes_them(tmp_path: Path, options: dict[str, object]) -> None:
    """A CPU torch's load_inline writes main.cpp and cuda.cu, then fails for want of CUDA_HOME."""

    def call() -> dict[str, object]:  # fresh lists each time: torch's load_inline inserts into them
        return {"name": "mirror", "cpp_sources": ["int f();"], "cuda_sources": ["int f() { return 1; }"], **options}

    torch_dir = tmp_path / "torch"
    torch_dir.mkdir()
    with pytest.raises(OSError, match="CUDA_HOME"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own notes about the toolchain, not ours to judge
        torch.utils.cpp_extension.load_inline(**call(), build_directory=str(torch_dir))
    with (
        pytest.raises(CudaBuildError, match="timed out"),
        intercept_load_inline(tmp_path, "compile_only", 0.01),
    ):
        torch.utils.cpp_extension.load_inline(**call())
    (ours,) = tmp_path.glob("mirror-*")
    for name in ("main.cpp", "cuda.cu"):
        assert (ours / name).read_text() == (torch_dir / name).read_text()


def test_load_inline_is_patched_inside_and_restored_after(tmp_path: Path) -> None:
    original = torch.utils.cpp_extension.load_inline
    with intercept_load_inline(tmp_path, "compile_only", 1.0):
        from torch.utils.cpp_extension import load_inline  # as a candidate imports it

        assert load_inline is torch.utils.cpp_extension.load_inline
        assert load_inline is not original
    assert torch.utils.cpp_extension.load_inline is original
    with pytest.raises(RuntimeError, match="boom"), intercept_load_inline(tmp_path, "build", 1.0):
        raise RuntimeError("boom")
    assert torch.utils.cpp_extension.load_inline is original


def test_source_hash_is_stable_and_sees_every_input() -> None:
    base = ("ext", ["int f();"], ["int f() { return 1; }"], ["f"], ["-O2"], ["-O3"])
    digest = source_hash(*base)
    assert digest == source_hash(*base)
    assert len(digest) == 20
    assert int(digest, 16) >= 0
    assert digest == source_hash("ext", "int f();", "int f() { return 1; }", ["f"], ["-O2"], ["-O3"])
    changed = [
        ("ext2", *base[1:]),
        (base[0], ["int f(); "], *base[2:]),
        (*base[:2], ["int f() { return 2; }"], *base[3:]),
        (*base[:3], ["f", "g"], *base[4:]),
        (*base[:4], ["-O1"], base[5]),
        (*base[:5], ["-O3", "--use_fast_math"]),
    ]
    digests = {source_hash(*args) for args in changed}
    assert len(digests) == len(changed)
    assert digest not in digests
    assert source_hash(*base, other_options={"extra_ldflags": ["-lcublas"]}) != digest


def test_parse_ptxas_verbose_reads_every_entry_function() -> None:
    output = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z2k3Pfi' for 'sm_90'
ptxas info    : Function properties for _Z2k3Pfi
    256 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size
ptxas info    : Compile time = 18.759 ms
ptxas info    : Compiling entry function '_Z2tkILi128EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z2tkILi128EEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 512 bytes smem
"""
    assert parse_ptxas_verbose(output) == (
        KernelResources("k3(float*, int)", "sm_90", 32, 0, 8, 4, 256),
        KernelResources("void tk<128>(float*)", "sm_90", 12, 512, 0, 0, 0),
    )


# -- "build" mode: a CUDA torch and a GPU -----------------------------------------------------------


@needs_gpu
def test_build_mode_builds_runs_and_reuses_the_build(tmp_path: Path) -> None:
    module, (report,) = import_candidate(HONEST, tmp_path, "build", timeout_s=300)
    assert isinstance(module, ModuleType)
    assert (report.mode, report.compiled, report.ran, report.cached, report.error) == (
        "build", True, True, False, None,
    )  # fmt: skip
    (kernel,) = report.kernels
    assert kernel.arch == "sm_90"
    assert kernel.registers_per_thread is not None
    assert kernel.registers_per_thread > 0
    model = module.ModelNew().cuda()
    for rows, cols in ((64, 781), (1024, 4096), (3, 1)):
        x = torch.randn(rows, cols, device="cuda") * 3.0
        torch.testing.assert_close(model(x), torch.softmax(x, dim=-1), atol=1e-4, rtol=1e-4)
    again, (second,) = import_candidate(HONEST, tmp_path, "build", timeout_s=300)
    assert isinstance(again, ModuleType)
    assert (second.cached, second.build_dir, second.kernels) == (True, report.build_dir, report.kernels)
    assert "ninja: no work to do" in second.compiler_output_tail


@needs_gpu
def test_build_mode_timeout_kills_ninja_and_frees_the_lock(tmp_path: Path) -> None:
    start = time.monotonic()
    raised, (report,) = import_candidate(HONEST, tmp_path, "build", timeout_s=8)
    assert time.monotonic() - start < 20
    assert type(raised) is CudaBuildError
    assert report.error == "build timed out after 8 s"
    assert processes_in(Path(report.build_dir)) == []
    assert not (Path(report.build_dir) / "lock").exists()


@needs_gpu
def test_build_mode_broken_candidate_is_a_compile_error(tmp_path: Path) -> None:
    raised, (report,) = import_candidate(BROKEN, tmp_path, "build", timeout_s=300)
    assert type(raised) is CudaBuildError
    assert report.error == 'cuda.cu(12): error: expected a ";"'


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the evaluator builds and runs instead")
def test_evaluator_says_compiled_not_run_without_a_gpu(
    honest_check: tuple[Path, ModuleType | Exception, list[CudaBuildReport]],
) -> None:
    cache_root, _, _ = honest_check
    config = EvalConfig(backend="cuda", cache_dir=cache_root.parent, timeout_s=600)
    result = evaluate_candidate(load_problem("softmax_fp32"), HONEST, config)
    assert result.status is EvalStatus.COMPILED
    assert result.reasons[0].startswith("compiled with nvcc for sm_90")
    assert result.reasons[0].endswith("not run (no GPU)")
    assert (result.runtime_ms, result.speedup, result.timing_valid) == (None, None, False)
