"""Build, or compile-check, the CUDA extensions that candidates create with ``load_inline``.

A KernelBench-style CUDA candidate calls ``torch.utils.cpp_extension.load_inline`` at import time.
The worker imports it inside :func:`intercept_load_inline`, which swaps that attribute for a replacement
before the import (so ``from torch.utils.cpp_extension import load_inline`` in the candidate gets
the replacement too) and puts the real one back on exit. Each call lands in
``cache_root/<name>-<source_hash>``: the hash covers the sources, every flag, torch's version, the
nvcc version and this module's recipe, so the same candidate reuses its build and a changed one never
sees a stale one.

Two modes, because two kinds of machine run the evaluator:

``"build"`` (a CUDA torch and a GPU). The real ``load_inline`` runs in a child Python process with
``verbose=True``, ``-Xptxas -v`` and, unless the candidate named an architecture,
``-gencode arch=compute_<arch>,code=sm_<arch>``. A child process rather than a thread, because:
(1) the timeout is then a plain ``wait(timeout)`` plus killing the child's process group, which takes
ninja, nvcc, cicc and ptxas with it; a thread cannot be stopped and would have to hunt for ninja's
pid; (2) torch's verbose build writes to file descriptor 1, which in a child is simply our log file,
with no redirection of the worker's own stdout; (3) a killed build cannot leave the worker's
interpreter half-initialised. The child costs one extra torch import (about 2 s) per evaluation.
After it succeeds, the worker imports the ``.so`` itself, as torch does; a second evaluation of the
same source runs the child again, ninja reports "no work to do", and the report says ``cached``.
A killed build leaves torch's ``lock`` file behind; it is removed, else the next build of the same
source would wait on it forever.

``"compile_only"`` (no CUDA torch: CI and laptops). ``load_inline(cuda_sources=...)`` cannot work
with a CPU torch (it has no CUDA_HOME), so the sources are written exactly as ``load_inline`` writes
them (``main.cpp`` with ``torch/extension.h`` and the generated pybind11 bindings; ``cuda.cu`` with
``torch/types.h``, ``cuda.h`` and ``cuda_runtime.h`` on top) and compiled to objects with the flags
torch would use: ``nvcc -c`` for sm_<arch> with ``-Xptxas -v``, and ``c++ -c`` for the bindings, both
at once, each in its own process group, killed together on the timeout or as soon as one fails.
Nothing is linked or run; :class:`CompiledNotRun` says so. A passing check is cached like a build.

What a CPU machine lacks, and what is done about it (measured with torch 2.13.0+cpu, CUDA 13.0):

- The CPU wheel ships ``c10/cuda`` and ``ATen/cuda`` headers but not the generated
  ``c10/cuda/impl/cuda_cmake_macros.h``, so ``c10/cuda/CUDAGuard.h`` and friends do not preprocess.
  A stand-in with the same content a CUDA build generates (``C10_CUDA_BUILD_SHARED_LIBS`` and the CUDA
  version numbers, here nvcc's) is supplied.
- The CUDA toolkit here is nvcc and cudart only: no cuBLAS, cuSPARSE or cuSOLVER headers, which
  ``ATen/cuda/CUDAContext.h`` (the usual way to get ``getCurrentCUDAStream``) includes. Stand-ins
  declare only the opaque handle and status types torch's headers name, so the candidate's own code
  is compiled for real. A candidate that calls those libraries then fails on an undeclared name; that,
  and any other header this machine lacks (cuRAND, cuDNN, ...), ends in
  :class:`CompileCheckUnavailable` (not run, not checked) rather than a compile error that is not
  the candidate's fault.

Stand-ins sit on the include path after every real directory and are written only for headers that
are really absent, so a complete toolkit never sees them; the report lists the ones the compiler used.
Not checked in compile-only mode: linking (a function declared in ``cpp_sources`` but never defined
fails only at import on a GPU machine) and anything at run time.

Outcomes leave the candidate's import as exceptions (:class:`CompiledNotRun`,
:class:`CudaBuildError`) because that is the only way out of a module body mid-import; the worker
turns them into results (not run; compile_error), so a failing kernel is still data past the worker.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import inspect
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from openkernel.evaluate.process import kill_process_tree

__all__ = [
    "CompileCheckUnavailable",
    "CompiledNotRun",
    "CudaBuildError",
    "CudaBuildReport",
    "KernelResources",
    "Mode",
    "default_mode",
    "intercept_load_inline",
    "nvcc_version",
    "parse_ptxas_verbose",
    "source_hash",
]

Mode = Literal["build", "compile_only"]

OUTPUT_TAIL_CHARS = 4000  # how much compiler output a report keeps (the end, where errors are)
ERROR_LINE_CHARS = 300  # a one-line reason longer than this is cut
_POLL_S = 0.05  # how often the compile loop looks at its processes
_GROUP_EXIT_WAIT_S = 5.0  # the longest a stopped compile's processes are waited for after SIGKILL
# Part of the cache key: bump it when the compile-only recipe (flags, stand-ins) changes.
_RECIPE_VERSION = "openkernel-cuda-build-1"
_STAND_IN_MARK = "openkernel stand-in header: "
# Names torch's headers need from the CUDA math libraries; a compile error naming one of them is
# not the candidate's fault when only stand-ins stood behind the names.
_LIBRARY_NAME = re.compile(r"\b(?:cublas|cusparse|cusolver|CUBLAS_|CUSPARSE_|CUSOLVER_)\w*")
# Headers that a full CUDA toolkit, or a CUDA build of torch, has and this machine may not: missing
# one is the machine's gap, not the candidate's error.
_TOOLKIT_HEADER_PREFIXES = (
    "cublas", "cusparse", "cusolver", "curand", "cufft", "cudnn", "nccl", "nvrtc", "nvToolsExt",
    "nvtx3", "cudss", "cufile", "npp", "nvjpeg", "cutensor", "nvml",
)  # fmt: skip
_TORCH_CUDA_HEADER_PREFIXES = (
    "c10/cuda/",
    "ATen/cuda/",
    "ATen/native/cuda/",
    "ATen/cudnn/",
    "torch/csrc/cuda/",
)
_MISSING_HEADER = re.compile(
    r"^(?P<includer>[^\s:][^:]*):\d+:\d+: fatal error: (?P<header>[^:]+): No such file or directory"
    r'|^(?P<includer2>\S.*?)\(\d+\): catastrophic error: cannot open source file "(?P<header2>[^"]+)"',
    re.MULTILINE,
)


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reported for one ``__global__`` function (from ``-Xptxas -v``)."""

    name: str  # demangled where c++filt is available, else as mangled
    arch: str | None  # e.g. "sm_90"
    registers_per_thread: int | None
    shared_bytes: int | None  # static shared memory per block; dynamic shared memory is not known here
    spill_stores_bytes: int | None
    spill_loads_bytes: int | None
    stack_frame_bytes: int | None


@dataclass(frozen=True)
class CudaBuildReport:
    """One ``load_inline`` call: what was built or checked, where, and how it went."""

    name: str
    source_hash: str
    mode: Mode
    compiled: bool  # every source compiled (in "build" mode: and linked)
    ran: bool  # the module was imported here, so the candidate can run; False when compile-only
    cached: bool  # nothing was recompiled: an earlier identical build or check was reused
    build_dir: str
    build_seconds: float
    compiler_output_tail: str  # the last OUTPUT_TAIL_CHARS characters
    kernels: tuple[KernelResources, ...]
    stand_in_headers: tuple[str, ...]  # headers absent here that stand-ins replaced (compile-only)
    error: str | None  # one line: why it failed or was not checked; None when it compiled


class CompiledNotRun(Exception):
    """The compile-only path finished and nothing ran: the worker stops and reports "not run".

    ``report.compiled`` says whether the check passed; see :class:`CompileCheckUnavailable`.
    """

    def __init__(self, report: CudaBuildReport, message: str) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:  # keeps the exception picklable across processes
        return (type(self), (self.report, str(self)))


class CompileCheckUnavailable(CompiledNotRun):
    """This machine lacks something the candidate needs (a header, a library): not checked, not run."""


class CudaBuildError(Exception):
    """The candidate's extension failed to compile or timed out; ``report.error`` is the reason."""

    def __init__(self, report: CudaBuildReport) -> None:
        super().__init__(report.error or "build failed")
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.report,))


def default_mode() -> Mode:
    """``"build"`` where torch can build and run CUDA code, else ``"compile_only"``."""
    import torch

    return "build" if torch.version.cuda is not None and torch.cuda.is_available() else "compile_only"


@functools.cache
def nvcc_version() -> str:
    """The last line of ``nvcc --version`` (names the exact build), or a note that nvcc is absent."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return "nvcc: not found"
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else f"nvcc --version exited {done.returncode}"


def source_hash(
    name: str,
    cpp_sources: str | Sequence[str] | None,
    cuda_sources: str | Sequence[str] | None,
    functions: str | Sequence[str] | Mapping[str, str] | None,
    extra_cflags: Sequence[str] | None,
    extra_cuda_cflags: Sequence[str] | None,
    *,
    other_options: Mapping[str, object] | None = None,
) -> str:
    """First 20 hex digits of a sha256 over everything that changes the build's result."""
    import torch

    key = {
        "name": name,
        "cpp_sources": _as_list(cpp_sources),
        "cuda_sources": _as_list(cuda_sources),
        "functions": [functions] if isinstance(functions, str) else functions,
        "extra_cflags": list(extra_cflags or []),
        "extra_cuda_cflags": list(extra_cuda_cflags or []),
        "other_options": dict(other_options or {}),
        "torch": torch.__version__,
        "nvcc": nvcc_version(),
        "recipe": _RECIPE_VERSION,
    }
    text = json.dumps(key, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def parse_ptxas_verbose(output: str) -> tuple[KernelResources, ...]:
    """The entry functions in ``-Xptxas -v`` output, in the order ptxas compiled them."""
    entries: dict[tuple[str, str | None], dict[str, int | None]] = {}
    properties: dict[str, tuple[int, int, int]] = {}
    current: tuple[str, str | None] | None = None
    props_for: str | None = None
    for line in output.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)' for '([^']+)'", line):
            current = (m[1], m[2])
            entries[current] = {}
        elif m := re.search(r"Function properties for (\S+)", line):
            props_for = m[1]
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            if props_for is not None:
                properties[props_for] = (int(m[1]), int(m[2]), int(m[3]))
        elif (m := re.search(r"Used (\d+) registers", line)) and current is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            entries[current] = {"registers": int(m[1]), "smem": int(smem[1]) if smem else 0}
    names = _demangle([mangled for mangled, _ in entries])
    kernels = []
    for (mangled, arch), used in entries.items():
        stack, spill_stores, spill_loads = properties.get(mangled, (None, None, None))
        kernels.append(
            KernelResources(
                name=names.get(mangled, mangled),
                arch=arch,
                registers_per_thread=used.get("registers"),
                shared_bytes=used.get("smem"),
                spill_stores_bytes=spill_stores,
                spill_loads_bytes=spill_loads,
                stack_frame_bytes=stack,
            )
        )
    return tuple(kernels)


@contextlib.contextmanager
def intercept_load_inline(
    cache_root: Path, mode: Mode, timeout_s: float, arch: str = "90"
) -> Iterator[list[CudaBuildReport]]:
    """Route every ``load_inline`` call made inside the block through a build or compile check.

    Yields the list that receives one report per call. In "build" mode the call returns the built
    module; in "compile_only" mode it raises :class:`CompiledNotRun` (or its subclass
    :class:`CompileCheckUnavailable`); a failed or timed-out compile raises :class:`CudaBuildError`.
    """
    from torch.utils import cpp_extension

    real = cpp_extension.load_inline
    signature = inspect.signature(real)
    reports: list[CudaBuildReport] = []

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        call = dict(signature.bind(*args, **kwargs).arguments)
        job = _Job.from_call(call, Path(cache_root), arch)
        if mode == "build":
            return _build(job, timeout_s, reports)
        _compile_only(job, timeout_s, reports)

    cpp_extension.load_inline = load_inline
    try:
        yield reports
    finally:
        cpp_extension.load_inline = real


@dataclass(frozen=True)
class _Job:
    """One intercepted call, with our flags added and its build directory chosen."""

    name: str
    cpp_sources: list[str]
    cuda_sources: list[str]
    functions: Any
    extra_cflags: list[str]
    extra_cuda_cflags: list[str]
    other: dict[str, Any]  # the call's remaining load_inline arguments, passed on unchanged
    digest: str
    build_dir: Path
    arch_label: str  # for messages: "sm_90", or what the candidate's own flags say

    @classmethod
    def from_call(cls, call: dict[str, Any], cache_root: Path, arch: str) -> _Job:
        name = str(call.pop("name"))
        cpp = _as_list(call.pop("cpp_sources", None))
        cuda = _as_list(call.pop("cuda_sources", None))
        functions = call.pop("functions", None)
        cflags = list(call.pop("extra_cflags", None) or [])
        cuda_flags = list(call.pop("extra_cuda_cflags", None) or [])
        for ours in ("build_directory", "verbose"):
            call.pop(ours, None)
        # torch adds its own arch flags unless some flag mentions "arch"; the same test decides here.
        named_arch = any("arch" in flag for flag in cuda_flags)
        if cuda and not named_arch:
            cuda_flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
        if cuda and not _asks_ptxas_verbose(cuda_flags):
            cuda_flags += ["-Xptxas", "-v"]
        digest = source_hash(name, cpp, cuda, functions, cflags, cuda_flags, other_options=call)
        safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        build_dir = cache_root / f"{safe_name}-{digest}"
        build_dir.mkdir(parents=True, exist_ok=True)
        label = "the architectures its own flags name" if named_arch else f"sm_{arch}"
        return cls(name, cpp, cuda, functions, cflags, cuda_flags, call, digest, build_dir, label)

    def report(self, mode: Mode, seconds: float, output: str, **fields: Any) -> CudaBuildReport:
        values: dict[str, Any] = {
            "compiled": False, "ran": False, "cached": False, "kernels": (), "stand_in_headers": (),
            "error": None,
        }  # fmt: skip
        values.update(fields)
        return CudaBuildReport(
            name=self.name,
            source_hash=self.digest,
            mode=mode,
            build_dir=str(self.build_dir),
            build_seconds=round(seconds, 3),
            compiler_output_tail=output[-OUTPUT_TAIL_CHARS:],
            **values,
        )


# -- "build": the real load_inline, in a child process --------------------------------------------

_BUILD_CHILD = """
import json, sys
from torch.utils.cpp_extension import load_inline
with open(sys.argv[1]) as f:
    load_inline(**json.load(f))
"""


def _build(job: _Job, timeout_s: float, reports: list[CudaBuildReport]) -> Any:
    request = job.build_dir / "openkernel_load_inline.json"
    kwargs = {
        **job.other,
        "name": job.name,
        "cpp_sources": job.cpp_sources,
        "cuda_sources": job.cuda_sources or None,
        "functions": job.functions,
        "extra_cflags": job.extra_cflags,
        "extra_cuda_cflags": job.extra_cuda_cflags,
        "build_directory": str(job.build_dir),
        "verbose": True,
    }
    request.write_text(json.dumps(kwargs))
    start = time.monotonic()
    child = [sys.executable, "-c", _BUILD_CHILD, str(request)]
    codes, timed_out = _run_together([(child, "build.log")], job.build_dir, timeout_s)
    seconds = time.monotonic() - start
    output = (job.build_dir / "build.log").read_text(errors="replace")
    if timed_out:
        # torch's FileBaton lock outlives a killed build and would stall every later build of this source.
        (job.build_dir / "lock").unlink(missing_ok=True)
        error = f"build timed out after {timeout_s:g} s"
        _fail(job.report("build", seconds, output, error=error), reports)
    if codes != [0]:
        error = _first_error_line(output, job.build_dir) or f"build failed (exit status {codes[0]})"
        _fail(job.report("build", seconds, output, error=error), reports)
    cached = "ninja: no work to do" in output
    usage = job.build_dir / "ptxas_verbose.log"  # ptxas speaks only when it compiles: keep what it said
    if "Compiling entry function" in output:
        usage.write_text(output)
    kernels = parse_ptxas_verbose(usage.read_text(errors="replace")) if usage.exists() else ()
    module = _import_built(job)
    reports.append(job.report("build", seconds, output, compiled=True, ran=True, cached=cached, kernels=kernels))
    return module


def _import_built(job: _Job) -> Any:
    """Load the library the child built, as torch's ``_import_module_from_library`` does."""
    library = job.build_dir / f"{job.name}.so"
    if not job.other.get("is_python_module", True):
        import torch

        torch.ops.load_library(str(library))  # type: ignore[no-untyped-call]
        return str(library)
    spec = importlib.util.spec_from_file_location(job.name, library)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the extension built at {library}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- "compile_only": nvcc and c++ on the sources load_inline would write ---------------------------


def _compile_only(job: _Job, timeout_s: float, reports: list[CudaBuildReport]) -> NoReturn:
    cpp_path, cuda_path = _write_sources(job)
    stand_ins = _write_stand_ins(job.build_dir.parent / "_stand_in_headers")
    passed_log = job.build_dir / "compile_check.log"
    what = f"compiled with nvcc for {job.arch_label}" if cuda_path else "compiled with c++"
    if passed_log.exists():
        output = passed_log.read_text(errors="replace")
        _passed(job, 0.0, output, what, reports, cached=True)
    cxx = os.environ.get("CXX", "c++")  # torch's choice of host compiler too
    commands = [([cxx, "-c", cpp_path.name, "-o", "main.cpp.o", *_cxx_flags(job, stand_ins)], "cxx.log")]
    if cuda_path is not None:
        nvcc = ["nvcc", "-c", cuda_path.name, "-o", "cuda.cu.o", *_nvcc_flags(job, stand_ins)]
        commands.insert(0, (nvcc, "nvcc.log"))
    start = time.monotonic()
    codes, timed_out = _run_together(commands, job.build_dir, timeout_s)
    seconds = time.monotonic() - start
    logs = {log: (job.build_dir / log).read_text(errors="replace") for _, log in commands}
    # Failing output last, so the tail a report keeps shows the error.
    parts = sorted(zip(codes, commands, strict=True), key=lambda part: part[0] not in (0, None))
    output = "\n".join(f"$ {' '.join(argv)}\n{logs[log]}" for _, (argv, log) in parts)
    if timed_out:
        _fail(
            job.report("compile_only", seconds, output, error=f"compile timed out after {timeout_s:g} s"),
            reports,
        )
    if all(code == 0 for code in codes):
        passed_log.write_text(output)
        _passed(job, seconds, output, what, reports, cached=False)
    first_error = _first_error_line(output, job.build_dir) or "compile failed"
    gap = _environment_gap(output, stand_ins)
    if gap is None:
        _fail(job.report("compile_only", seconds, output, error=first_error), reports)
    error = f"not compile-checked: {gap}; first error: {first_error}"
    report = job.report("compile_only", seconds, output, error=error, stand_in_headers=_used_stand_ins(output))
    reports.append(report)
    raise CompileCheckUnavailable(report, f"{error}; not run (no GPU)")


def _passed(
    job: _Job, seconds: float, output: str, what: str, reports: list[CudaBuildReport], *, cached: bool
) -> NoReturn:
    used = _used_stand_ins(output)
    report = job.report(
        "compile_only", seconds, output, compiled=True, cached=cached, kernels=parse_ptxas_verbose(output),
        stand_in_headers=used,
    )  # fmt: skip
    reports.append(report)
    note = f" (with stand-ins for headers absent here: {', '.join(used)})" if used else ""
    raise CompiledNotRun(report, f"{what}{note}; not run (no GPU)")


def _fail(report: CudaBuildReport, reports: list[CudaBuildReport]) -> NoReturn:
    reports.append(report)
    raise CudaBuildError(report)


def _write_sources(job: _Job) -> tuple[Path, Path | None]:
    """``main.cpp`` and ``cuda.cu`` as torch's ``load_inline`` composes them (torch 2.13)."""
    implicit = not job.other.get("no_implicit_headers", False)
    cpp = (["#include <torch/extension.h>"] if implicit else []) + job.cpp_sources
    if job.functions is not None:
        functions = job.functions
        if isinstance(functions, str):
            functions = [functions]
        if not isinstance(functions, Mapping):
            functions = {function: function for function in functions}
        wrap = job.other.get("with_pytorch_error_handling", True)
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for function, doc in functions.items():
            bound = f"torch::wrap_pybind_function({function})" if wrap else function
            cpp.append(f'm.def("{function}", {bound}, "{doc}");')
        cpp.append("}")
    cpp_path = job.build_dir / "main.cpp"
    _write_if_changed(cpp_path, "\n".join(cpp))
    if not job.cuda_sources:
        return cpp_path, None
    headers = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    cuda_path = job.build_dir / "cuda.cu"
    _write_if_changed(cuda_path, "\n".join((headers if implicit else []) + job.cuda_sources))
    return cpp_path, cuda_path


def _common_flags(job: _Job, stand_ins: Path) -> list[str]:
    import torch
    from torch.utils.cpp_extension import include_paths

    system = [
        *include_paths(),
        *_cuda_include_dirs(),
        sysconfig.get_path("include", scheme="posix_prefix"),
        str(stand_ins),
    ]
    user = [f"-I{Path(path).absolute()}" for path in job.other.get("extra_include_paths") or []]
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [
        f"-DTORCH_EXTENSION_NAME={job.name}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *user,
        *(flag for path in system for flag in ("-isystem", path)),
    ]


def _nvcc_flags(job: _Job, stand_ins: Path) -> list[str]:
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    flags = [
        *_common_flags(job, stand_ins),
        *COMMON_NVCC_FLAGS,
        "--compiler-options",
        "-fPIC",
        *job.extra_cuda_cflags,
    ]
    return flags if any(flag.startswith("-std=") for flag in flags) else [*flags, "-std=c++20"]


def _cxx_flags(job: _Job, stand_ins: Path) -> list[str]:
    return [*_common_flags(job, stand_ins), "-fPIC", "-std=c++20", *job.extra_cflags]


def _cuda_include_dirs() -> list[str]:
    """The CUDA toolkit's include directory, which torch adds for the C++ side of a CUDA extension."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        homes.append(str(Path(nvcc).resolve().parent.parent))
    for home in homes:
        if home and (Path(home) / "include" / "cuda.h").exists():
            return [str(Path(home) / "include")]
    return []


def _write_stand_ins(directory: Path) -> Path:
    """Write a stand-in for each header in ``_stand_in_texts`` that no real include directory has."""
    from torch.utils.cpp_extension import include_paths

    real_dirs = [Path(path) for path in [*include_paths(), *_cuda_include_dirs()]]
    for header, body in _stand_in_texts().items():
        path = directory / header
        if any((real / header).exists() for real in real_dirs):
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_if_changed(path, f'#pragma once\n#pragma message("{_STAND_IN_MARK}{header}")\n{body}')
    return directory


def _stand_in_texts() -> dict[str, str]:
    release = re.search(r"V(\d+)\.(\d+)\.(\d+)", nvcc_version())
    major, minor, patch = release.groups() if release else ("0", "0", "0")
    return {
        # What a CUDA build of torch generates from c10/cuda/impl/cuda_cmake_macros.h.in.
        "c10/cuda/impl/cuda_cmake_macros.h": (
            "#define C10_CUDA_BUILD_SHARED_LIBS\n"
            f"#define TORCH_CUDA_VERSION_MAJOR {major}\n#define TORCH_CUDA_VERSION_MINOR {minor}\n"
            f"#define TORCH_CUDA_VERSION_PATCH {patch}\n#define TORCH_CUDA_VERSION_BUILD 0\n"
        ),
        # Only the opaque types ATen/cuda/CUDAContextLight.h and ATen/cuda/Exceptions.h name.
        "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\n"
        "typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\n",
        "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;\n",
        "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\n"
        "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n",
        "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3 }"
        " cusolverStatus_t;\n",
        "cusolverDn.h": "#include <cusolver_common.h>\ntypedef struct cusolverDnContext* cusolverDnHandle_t;\n",
    }


def _used_stand_ins(output: str) -> tuple[str, ...]:
    found = re.findall(re.escape(_STAND_IN_MARK) + r"([\w./]+)", output)
    return tuple(dict.fromkeys(found))


def _environment_gap(output: str, stand_ins: Path) -> str | None:
    """Why a failed check says more about this machine than the candidate, or None if it does not."""
    import torch

    torch_include = str(Path(torch.__file__).parent / "include")
    for m in _MISSING_HEADER.finditer(output):
        header = m["header"] or m["header2"]
        includer = m["includer"] or m["includer2"] or ""
        if includer.startswith(torch_include) or header.startswith(_TORCH_CUDA_HEADER_PREFIXES):
            return f"torch here is a CPU build without <{header}>"
        if header.startswith(_TOOLKIT_HEADER_PREFIXES):
            return f"the CUDA toolkit here has no <{header}>"
    stand_in_names = {str(path.relative_to(stand_ins)) for path in stand_ins.rglob("*.h")}
    if stand_in_names & {"cublas_v2.h", "cusparse.h", "cusolverDn.h"}:
        for line in output.splitlines():
            if re.search(r"\berror\b", line) and _LIBRARY_NAME.search(line):
                return "it calls cuBLAS/cuSPARSE/cuSOLVER, whose headers this machine lacks"
    return None


# -- shared helpers ---------------------------------------------------------------------------------


def _run_together(commands: list[tuple[list[str], str]], cwd: Path, timeout_s: float) -> tuple[list[int | None], bool]:
    """Run the commands at once, each in its own process group, output to its log.

    Returns the exit codes (None for one stopped early) and whether the deadline passed. Stops
    every group still running on the timeout or as soon as one command fails.
    """
    deadline = time.monotonic() + timeout_s
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for argv, log_name in commands:
            with (cwd / log_name).open("wb") as log:
                procs.append(
                    subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )
        while True:
            codes = [proc.poll() for proc in procs]
            if all(code is not None for code in codes) or any(code not in (None, 0) for code in codes):
                return codes, False
            if time.monotonic() >= deadline:
                return codes, True
            time.sleep(_POLL_S)
    finally:
        killed = [proc for proc in procs if proc.poll() is None]  # a group is surely ours while its leader lives
        for proc in killed:
            kill_process_tree(proc.pid)
        for proc in procs:
            proc.wait()
        _wait_for_groups_to_die([proc.pid for proc in killed])


def _wait_for_groups_to_die(groups: list[int]) -> None:
    """Orphaned members of a killed group (cicc, ptxas) take some milliseconds to go: wait for them,
    so that nothing of a stopped compile outlives the call."""
    deadline = time.monotonic() + _GROUP_EXIT_WAIT_S
    for group in groups:
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)  # signal 0: only asks whether any member is left
            except ProcessLookupError:
                break
            time.sleep(0.01)


def _first_error_line(output: str, build_dir: Path) -> str | None:
    """The compiler's first diagnostic, else the first line that mentions an error or a fatal.

    Paths inside the build directory are shortened to their file names.
    """
    lines = [line.strip().replace(f"{build_dir}/", "") for line in output.splitlines()]
    for pattern in (r"\berror\b\s*:", r"\bfatal\b", r"\berror\b"):
        for line in lines:
            if line.startswith("$ ") or not re.search(pattern, line, re.IGNORECASE):
                continue
            return line[:ERROR_LINE_CHARS]
    return None


def _demangle(names: list[str]) -> dict[str, str]:
    cxxfilt = shutil.which("c++filt")
    if not names or cxxfilt is None:
        return {}
    done = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=False)
    demangled = done.stdout.splitlines()
    return dict(zip(names, demangled, strict=True)) if done.returncode == 0 and len(demangled) == len(names) else {}


def _as_list(sources: str | Sequence[str] | None) -> list[str]:
    if sources is None:
        return []
    return [sources] if isinstance(sources, str) else list(sources)


def _asks_ptxas_verbose(flags: list[str]) -> bool:
    if any(flag in ("-Xptxas=-v", "--ptxas-options=-v", "--resource-usage", "-res-usage") for flag in flags):
        return True
    return ("-Xptxas", "-v") in itertools.pairwise(flags)


def _write_if_changed(path: Path, text: str) -> None:
    """Leave an identical file alone (as torch's ``_maybe_write`` does), so timestamps stay put.

    Writes go through a temporary file and a rename: another worker may be compiling against it.
    """
    if path.exists() and path.read_text() == text:
        return
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)
