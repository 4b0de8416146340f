"""Compile a recorded Triton launch for a GPU target (Hopper by default), with or without a GPU.

:func:`compile_for_target` turns one recorded launch back into ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))``. That needs no GPU and no driver: PTX comes from LLVM and the cubin
from the ``ptxas`` that Triton ships, whose ``-v`` log gives registers and spills (the ``n_regs`` and
``n_spills`` attributes of a ``CompiledKernel`` need a driver, which a CPU machine lacks). In the
interpreter ``@triton.jit`` gives an ``InterpretedFunction``; its Python function (``.fn``) is wrapped
in a fresh ``JITFunction``, with any ``@triton.jit`` helpers it calls converted the same way (and the
interpreter's leftovers in ``triton.language`` undone first: see ``_pristine_language``). On the H200
host the registers this reports equal the driver's ``n_regs`` for the same kernels.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import sys
import time
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from openkernel.evaluate.triton_launches import TritonLaunch

__all__ = ["MAX_ERROR_CHARS", "TritonCompileReport", "compile_for_target", "one_line", "remember_pristine_language"]

WARP_SIZE_THREADS: Final = 32
# An error in a report is one line; long compiler messages are cut here (characters).
MAX_ERROR_CHARS: Final = 400
_MISSING: Final = object()


@dataclass(frozen=True)
class TritonCompileReport:
    """The verdict of compiling one launch for one GPU target on a machine that may have no GPU.

    Resources come from ``ptxas -v`` (per thread: registers, spill bytes) and from Triton's metadata
    (``shared_bytes``: the dynamic shared memory the launcher asks for). ``None`` means "not learnt",
    e.g. when compilation failed before ``ptxas`` ran.
    """

    kernel_name: str
    target: str
    ok: bool
    error: str | None
    compile_seconds: float
    registers_per_thread: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    shared_bytes: int | None = None
    ptx_lines: int | None = None


_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def compile_for_target(launch: TritonLaunch, fn: Any, arch: int = 90) -> TritonCompileReport:
    """Compile ``launch`` for ``sm_<arch>`` with the installed Triton; never needs a GPU.

    ``fn`` is the kernel as the candidate defined it: a ``JITFunction``, an ``InterpretedFunction``, a
    plain Python function, or an autotune / heuristics wrapper around one. Every failure (a compile
    error, a ``ptxas`` error, a launch that cannot be rebuilt) is a report with ``ok=False`` and a one-line
    error, never an exception: a failing kernel is data.
    """
    target = f"cuda:{arch}"
    start_s = time.perf_counter()
    ptxas_log = io.StringIO()
    try:
        if launch.unrebuildable:
            raise ValueError(
                f"arguments {', '.join(launch.unrebuildable)} were recorded by repr only "
                "(tuples or objects passed as constexpr) and cannot be rebuilt for a compile check"
            )
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        _restore_pristine_language()
        memo: dict[int, Any] = {}
        jit_fn = _as_jit_function(fn, memo)
        constexprs = {
            name: tl.dtype(value) if name in launch.dtype_constexprs else value for name, value in launch.constexprs
        }
        arg_index = {name: i for i, (name, _) in enumerate(launch.signature)}
        attrs = {(arg_index[name],): [["tt.divisibility", 16]] for name in launch.divisible_by_16}
        source = ASTSource(fn=jit_fn, signature=launch.signature_map(), constexprs=constexprs, attrs=attrs)
        options: dict[str, Any] = {
            "num_warps": launch.num_warps,
            "num_stages": launch.num_stages,
            # Explicit, so 3.9 does not warn about its changing default; the value is the runtime's.
            "enable_fp_fusion": bool(getattr(triton.knobs.language, "default_fp_fusion", True)),
        }
        if launch.maxnreg is not None:
            options["maxnreg"] = launch.maxnreg
        knobs = triton.knobs
        # always_compile: a cache hit would skip ptxas and with it the resource log; the Triton
        # compiler prints that log (and, on failure, whole PTX dumps) to stdout, which may be the
        # worker's message channel, so stdout is captured for the duration.
        with (
            _library_as_jit(memo),
            knobs.nvidia.scope(),
            knobs.compilation.scope(),
            contextlib.redirect_stdout(ptxas_log),
        ):
            knobs.nvidia.dump_ptxas_log = True
            knobs.compilation.always_compile = True
            compiled = triton.compile(source, target=GPUTarget("cuda", arch, WARP_SIZE_THREADS), options=options)
    except Exception as exc:
        return TritonCompileReport(
            kernel_name=launch.kernel_name,
            target=target,
            ok=False,
            error=one_line(exc),
            compile_seconds=time.perf_counter() - start_s,
        )
    elapsed_s = time.perf_counter() - start_s
    log = ptxas_log.getvalue()
    registers = _REGISTERS.search(log)
    spills = _SPILLS.search(log)
    shared = getattr(compiled.metadata, "shared", None)
    ptx = compiled.asm.get("ptx") if hasattr(compiled.asm, "get") else None
    return TritonCompileReport(
        kernel_name=launch.kernel_name,
        target=target,
        ok=True,
        error=None,
        compile_seconds=elapsed_s,
        registers_per_thread=int(registers.group(1)) if registers else None,
        spill_store_bytes=int(spills.group(1)) if spills else None,
        spill_load_bytes=int(spills.group(2)) if spills else None,
        shared_bytes=int(shared) if isinstance(shared, int) else None,
        ptx_lines=len(ptx.splitlines()) if isinstance(ptx, str) else None,
    )


# The interpreter patches triton.language in place while a kernel runs. GridExecutor undoes its own
# patches, but a call to a @jit library function (tl.max, tl.sum, ...) patches tl.core again from
# InterpretedFunction.__call__ and never undoes it (triton 3.6 and 3.9 alike). The code generator then
# calls interpreter lambdas and fails ("'value' object has no attribute 'dtype'"). So the first
# recorder (or compile) remembers the language as Triton defined it, and every compile puts it back.
_pristine_language: dict[Any, dict[str, Any]] | None = None


def _language_objects() -> list[Any]:
    """What _patch_lang touches: tl, tl.core, tl.math and the classes of tl.core."""
    import triton.language as tl

    core = tl.core
    classes = [v for v in vars(core).values() if isinstance(v, type) and v.__module__ == core.__name__]
    return [tl, core, tl.math, *classes]


def _interpreter_patched() -> bool:
    """Whether tl.core currently holds functions defined by the interpreter."""
    import triton.language as tl

    return any(
        getattr(getattr(v, "__code__", None), "co_filename", "").endswith("interpreter.py")
        for v in vars(tl.core).values()
    )


def remember_pristine_language() -> None:
    global _pristine_language  # noqa: PLW0603 - one clean copy per process, by design (see above)
    if _pristine_language is None and not _interpreter_patched():
        _pristine_language = {obj: dict(vars(obj)) for obj in _language_objects()}


def _restore_pristine_language() -> None:
    remember_pristine_language()
    if _pristine_language is None:
        raise RuntimeError(
            "triton.language is still patched by the Triton interpreter and no clean copy was kept: "
            "install a LaunchRecorder (or compile once) before running interpreter kernels"
        )
    for obj, saved in _pristine_language.items():
        current = vars(obj)
        # Added names are the interpreter's (e.g. tensor.__index__), except submodules imported since
        # the snapshot: deleting those would break ``tl.<submodule>`` for the rest of the process.
        for name in [k for k, v in current.items() if k not in saved and not inspect.ismodule(v)]:
            delattr(obj, name)
        for name, value in saved.items():
            if current.get(name, _MISSING) is not value:
                setattr(obj, name, value)


def _as_jit_function(fn: Any, memo: dict[int, Any]) -> Any:
    """A ``JITFunction`` for ``fn``: unwraps autotune / heuristics, converts interpreter kernels."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    kernel = fn
    while not isinstance(kernel, JITFunction | InterpretedFunction) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    if isinstance(kernel, JITFunction):
        return kernel
    if isinstance(kernel, InterpretedFunction):
        return _jit_from_python(kernel.fn, kernel.kwargs, memo)
    if inspect.isfunction(kernel):
        return _jit_from_python(kernel, {}, memo)
    raise TypeError(f"cannot compile {fn!r}: not a Triton kernel or Python function")


@contextlib.contextmanager
def _library_as_jit(memo: dict[int, Any]) -> Iterator[None]:
    """Swap the interpreter's versions of Triton's own @jit functions (tl.max, tl.sum, tl.rand, ...)
    for JITFunctions while compiling: kernels reach them as module attributes (``tl.max``), which a
    copy of the kernel's globals cannot redirect. Put back afterwards so the interpreter keeps working.
    """
    from triton.runtime.interpreter import InterpretedFunction

    swaps = [
        (module, attr, value)
        for name, module in list(sys.modules.items())
        if module is not None and (name == "triton.language" or name.startswith("triton.language."))
        for attr, value in list(vars(module).items())
        if isinstance(value, InterpretedFunction)
    ]
    try:
        for module, attr, value in swaps:
            setattr(module, attr, _jit_from_python(value.fn, value.kwargs, memo))
        yield
    finally:
        for module, attr, value in swaps:
            setattr(module, attr, value)


def _jit_from_python(python_fn: types.FunctionType, jit_options: Mapping[str, Any], memo: dict[int, Any]) -> Any:
    """Rebuild an interpreter kernel as a JITFunction over a copy of its globals.

    The Triton code generator resolves callees through the function's globals and accepts only
    JITFunctions there, while in interpreter mode every ``@triton.jit`` helper is an
    InterpretedFunction. So the kernel gets a private copy of its module globals in which each such
    helper is replaced by its own rebuilt JITFunction (memoised, so recursion and shared helpers work).
    The candidate's module is left untouched. ``jit_options`` are the decorator's keyword arguments
    (``do_not_specialize``, ``noinline``, ...), which InterpretedFunction keeps as ``.kwargs``.
    """
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if id(python_fn) in memo:
        return memo[id(python_fn)]
    scope = dict(python_fn.__globals__)
    clone = types.FunctionType(
        python_fn.__code__, scope, python_fn.__name__, python_fn.__defaults__, python_fn.__closure__
    )
    clone.__qualname__ = python_fn.__qualname__
    clone.__annotations__ = dict(python_fn.__annotations__)
    clone.__kwdefaults__ = python_fn.__kwdefaults__
    clone.__module__ = python_fn.__module__
    accepted = inspect.signature(JITFunction.__init__).parameters
    jit_fn = JITFunction(clone, **{k: v for k, v in jit_options.items() if k in accepted and k != "fn"})
    memo[id(python_fn)] = jit_fn
    for name, value in list(python_fn.__globals__.items()):
        if isinstance(value, InterpretedFunction):
            scope[name] = _jit_from_python(value.fn, value.kwargs, memo)
    return jit_fn


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line; Triton's compile errors keep their position and the cause."""
    message = getattr(exc, "error_message", None)
    text = str(exc)
    if isinstance(message, str) and message:
        first = text.splitlines()[0] if text else ""
        where = first.rstrip(":") + ": " if first.startswith("at ") else ""
        text = where + message
    text = " ".join(text.split()) or repr(exc)
    line = f"{type(exc).__name__}: {text}"
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."
