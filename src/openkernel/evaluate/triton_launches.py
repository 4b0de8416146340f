"""Prove that a candidate really launched its Triton kernels (and which, how often, how specialised).

A candidate file defines ``ModelNew`` whose ``forward`` is supposed to launch ``@triton.jit`` kernels.
"It returned the right numbers" does not show that: a forward that calls ``torch.softmax`` passes too.
So the worker installs a :class:`LaunchRecorder` *before* it imports the candidate, runs ``forward``,
and reads back which kernels were launched, how often, and with which specialisation.

Where the recorder listens, and why there:

* ``JITFunction.run`` and ``InterpretedFunction.run`` (patched on the class). ``kernel[grid](...)`` is
  ``KernelInterface.__getitem__``, a lambda that looks ``self.run`` up at call time; ``kernel.run(...)``,
  ``triton.autotune`` and ``triton.heuristics`` all end in the *inner* kernel's ``run``. One patch on the
  class therefore sees every launch of every kernel, including kernels defined after installation,
  exactly once, named by the inner kernel. It is also the only place that sees the arguments, so it is
  where the specialisation (argument types, constexprs, alignment) is taken, with Triton's own binder.
  ``warmup=True`` calls compile without launching and are not counted.
* ``Autotuner._bench`` (patched): launches made while the autotuner benchmarks its configs go to
  ``tuning_counts``, not ``counts``, so that ``counts`` is one per launch the forward asked for.
* ``triton.knobs.runtime.launch_enter_hook`` (compiled mode only). It fires inside the C launcher, so it
  confirms that a ``run`` really reached the driver, and it also sees launches that bypass ``run``
  (a ``CompiledKernel`` launched by hand, TorchInductor's kernels). Its tallies go to ``hook_counts``;
  they are evidence, not proof of a *custom* kernel: ``torch.compile`` shows up there too (two calls of
  one compiled function gave 214 launches of ``triton_poi_fused_...``, its own tuning included), so
  ``counts`` is what says that the candidate's own ``@triton.jit`` kernels ran. Triton 3.6 and 3.9
  both hold a ``HookChain`` there; older releases held one callable there or on ``CompiledKernel``,
  and the recorder chains itself in front of whatever was set. The interpreter never calls it, so in
  interpreter mode ``hook_counts`` stays empty.

Cost: a repeated specialisation is recognised by a cheap key before Triton's binder runs; on the H200
host (triton 3.6) a small launch took 16.8 us with the recorder against 12.5 us without.

A candidate runs in the same process and could undo the patches; :meth:`LaunchRecorder.is_intact` tells
the worker, after the candidate ran, whether every patched attribute is still the recorder's. It is a
tripwire for reassignment, not a sandbox: the worker process itself is the isolation boundary.

:func:`compile_for_target` (in :mod:`openkernel.evaluate.triton_target`) compiles a recorded launch for
Hopper without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from openkernel.evaluate.triton_target import (
    TritonCompileReport,
    compile_for_target,
    one_line,
    remember_pristine_language,
)

__all__ = [
    "ConstexprValue",
    "LaunchRecorder",
    "RecorderMode",
    "TritonCompileReport",
    "TritonLaunch",
    "compile_for_target",
    "record_triton_launches",
]

# A constexpr as it travels in a worker message: JSON scalars only. A ``tl.dtype`` travels as its
# name (listed in ``dtype_constexprs``); anything else travels as its repr (listed in ``unrebuildable``).
ConstexprValue = int | float | bool | str | None

# "interpreter": TRITON_INTERPRET=1, only the run patches see launches.
# "launch-hook": compiled mode with a driver-level launch hook beside the run patches.
# "run-wrapper": compiled mode on a Triton without any launch hook: the run patches alone.
RecorderMode = Literal["interpreter", "launch-hook", "run-wrapper"]

# Triton's defaults for the CUDA backend (CUDAOptions in 3.6 and 3.9), used when a launch names none.
DEFAULT_NUM_WARPS: Final = 4
DEFAULT_NUM_STAGES: Final = 3


@dataclass(frozen=True)
class TritonLaunch:
    """One launch of one kernel: enough to recompile exactly the specialisation that ran.

    ``signature`` pairs every parameter, in order, with the type string ``ASTSource`` takes ("*fp32",
    "i32", "fp32", "constexpr", ...). Parameters Triton specialised to constants (constexprs, ints equal
    to 1, ``None``) are "constexpr" there and carry their value in ``constexprs``. ``divisible_by_16``
    names the pointers and ints Triton assumed 16-aligned, since that changes the code it emits.
    """

    kernel_name: str
    grid: tuple[int, ...]
    num_warps: int
    num_stages: int
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, ConstexprValue], ...]
    divisible_by_16: tuple[str, ...] = ()
    dtype_constexprs: tuple[str, ...] = ()
    unrebuildable: tuple[str, ...] = ()
    maxnreg: int | None = None

    @property
    def specialisation(self) -> TritonLaunch:
        """This launch without its grid: the key under which one record per specialisation is kept."""
        return dataclasses.replace(self, grid=())

    def signature_map(self) -> dict[str, str]:
        return dict(self.signature)

    def constexpr_map(self) -> dict[str, ConstexprValue]:
        return dict(self.constexprs)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict for a worker message; :meth:`from_json` reads it back."""
        return {
            "kernel_name": self.kernel_name,
            "grid": list(self.grid),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "signature": [list(pair) for pair in self.signature],
            "constexprs": [list(pair) for pair in self.constexprs],
            "divisible_by_16": list(self.divisible_by_16),
            "dtype_constexprs": list(self.dtype_constexprs),
            "unrebuildable": list(self.unrebuildable),
            "maxnreg": self.maxnreg,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TritonLaunch:
        """Validate a worker message (an edge: it may come from a crashed or hostile process)."""

        def ints(value: Any, what: str) -> tuple[int, ...]:
            if not isinstance(value, list) or not all(type(v) is int for v in value):
                raise ValueError(f"TritonLaunch.{what} must be a list of ints, got {value!r}")
            return tuple(value)

        def strs(value: Any, what: str) -> tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"TritonLaunch.{what} must be a list of strings, got {value!r}")
            return tuple(value)

        def pairs(value: Any, what: str) -> list[tuple[str, Any]]:
            if not isinstance(value, list) or not all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in value
            ):
                raise ValueError(f"TritonLaunch.{what} must be a list of [name, value] pairs, got {value!r}")
            return [(p[0], p[1]) for p in value]

        name = data.get("kernel_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"TritonLaunch.kernel_name must be a non-empty string, got {name!r}")
        signature = pairs(data.get("signature"), "signature")
        if not all(isinstance(ty, str) for _, ty in signature):
            raise ValueError("TritonLaunch.signature types must be strings")
        constexprs = pairs(data.get("constexprs"), "constexprs")
        if not all(v is None or isinstance(v, int | float | str) for _, v in constexprs):
            raise ValueError("TritonLaunch.constexprs values must be JSON scalars")
        num_warps, num_stages = data.get("num_warps"), data.get("num_stages")
        if type(num_warps) is not int or type(num_stages) is not int:
            raise ValueError(f"TritonLaunch.num_warps/num_stages must be ints, got {num_warps!r}, {num_stages!r}")
        maxnreg = data.get("maxnreg")
        if maxnreg is not None and type(maxnreg) is not int:
            raise ValueError(f"TritonLaunch.maxnreg must be an int or null, got {maxnreg!r}")
        return cls(
            kernel_name=name,
            grid=ints(data.get("grid"), "grid"),
            num_warps=num_warps,
            num_stages=num_stages,
            signature=tuple((k, str(v)) for k, v in signature),
            constexprs=tuple(constexprs),
            divisible_by_16=strs(data.get("divisible_by_16", []), "divisible_by_16"),
            dtype_constexprs=strs(data.get("dtype_constexprs", []), "dtype_constexprs"),
            unrebuildable=strs(data.get("unrebuildable", []), "unrebuildable"),
            maxnreg=maxnreg,
        )


@dataclass(frozen=True)
class _Patch:
    """One attribute the recorder replaced, with what is needed to put it back exactly."""

    owner: Any
    attr: str
    original: Any
    replacement: Any
    had_own: bool  # False: the attribute was inherited, so restoring means deleting ours

    def apply(self) -> None:
        setattr(self.owner, self.attr, self.replacement)

    def restore(self) -> None:
        if self.had_own:
            setattr(self.owner, self.attr, self.original)
        elif self.attr in vars(self.owner):
            delattr(self.owner, self.attr)

    def intact(self) -> bool:
        return vars(self.owner).get(self.attr) is self.replacement


def _patch(owner: Any, attr: str, replacement: Any) -> _Patch:
    own = vars(owner)
    return _Patch(owner, attr, own.get(attr, getattr(owner, attr, None)), replacement, attr in own)


def _bump(tally: dict[str, int], name: str) -> None:
    tally[name] = tally.get(name, 0) + 1


class LaunchRecorder:
    """Counts Triton launches per kernel name and keeps the first launch of each specialisation.

    Install it before the candidate is imported (class-level patches also catch kernels defined
    later), run the candidate, check :meth:`is_intact`, read the tallies, then :meth:`uninstall`.

    * ``counts``: launches the forward asked for that returned without raising (not warmups, not the
      autotuner's benchmark runs), per kernel name.
    * ``failures``: launches that raised (a compile error, an interpreter error).
    * ``tuning_counts``: launches made by ``triton.autotune`` while benchmarking configs.
    * ``hook_counts``: compiled mode only: launches the driver-level launch hook saw.
    * ``launches``: the first :class:`TritonLaunch` of each distinct specialisation, in order.
    * ``record_errors``: kernel name -> why its launch could not be described (it is still counted).
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        self.tuning_counts: dict[str, int] = {}
        self.hook_counts: dict[str, int] = {}
        self.launches: list[TritonLaunch] = []
        self.record_errors: dict[str, str] = {}
        self.mode: RecorderMode | None = None
        self._kernels: dict[TritonLaunch, Any] = {}
        self._binders: dict[int, tuple[Any, Callable[..., Any]]] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self._patches: list[_Patch] = []
        self._hook_chain: Any = None
        self._tuning_depth = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def installed(self) -> bool:
        return self.mode is not None

    def install(self) -> LaunchRecorder:
        """Patch Triton's launch paths. Must run before the candidate module is imported."""
        if self.installed:
            raise RuntimeError("LaunchRecorder.install() called twice; uninstall() it first")
        import triton
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        interpret = bool(triton.knobs.runtime.interpret) if hasattr(triton, "knobs") else False
        remember_pristine_language()
        patches = [
            _patch(JITFunction, "run", self._wrap_run(JITFunction.run)),
            _patch(InterpretedFunction, "run", self._wrap_run(InterpretedFunction.run)),
            _patch(Autotuner, "_bench", self._wrap_bench(Autotuner._bench)),
        ]
        mode: RecorderMode = "interpreter" if interpret else "run-wrapper"
        if not interpret:
            hook_patch, chain = self._launch_hook_site(triton)
            if chain is not None:
                chain.add(self._on_launch)
                self._hook_chain = chain
                mode = "launch-hook"
            elif hook_patch is not None:
                patches.append(hook_patch)
                mode = "launch-hook"
        for patch in patches:
            patch.apply()
        self._patches = patches
        self.mode = mode
        return self

    def uninstall(self) -> None:
        """Put back every original attribute; the tallies stay readable."""
        for patch in reversed(self._patches):
            patch.restore()
        if self._hook_chain is not None:
            self._hook_chain.remove(self._on_launch)
        self._patches = []
        self._hook_chain = None
        self.mode = None

    def is_intact(self) -> bool:
        """Whether every patched attribute is still the recorder's (False also when not installed)."""
        if not self.installed or not all(patch.intact() for patch in self._patches):
            return False
        if self._hook_chain is None:
            return True
        import triton

        return triton.knobs.runtime.launch_enter_hook is self._hook_chain and self._on_launch in self._hook_chain.calls

    def kernel_for(self, launch: TritonLaunch) -> Any:
        """The kernel object (JITFunction or InterpretedFunction) that made ``launch``."""
        return self._kernels[launch.specialisation]

    def compile_all(self, arch: int = 90) -> list[TritonCompileReport]:
        """Compile every recorded specialisation for ``sm_<arch>``: one report per launch record."""
        return [compile_for_target(launch, self.kernel_for(launch), arch) for launch in self.launches]

    def __enter__(self) -> LaunchRecorder:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    # -- the patched entry points -------------------------------------------------------------------

    def _wrap_run(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        # Takes everything as given and passes it on untouched: the wrapper must not change how
        # Triton parses a launch (grid and warmup are keyword-only there).
        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup", False):
                return original(kernel, *args, **kwargs)
            name = recorder._describe(kernel, args, kwargs)
            try:
                result = original(kernel, *args, **kwargs)
            except BaseException:
                _bump(recorder.failures, name)
                raise
            _bump(recorder.tuning_counts if recorder._tuning_depth else recorder.counts, name)
            return result

        return run

    def _wrap_bench(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        def _bench(autotuner: Any, *args: Any, **kwargs: Any) -> Any:
            recorder._tuning_depth += 1
            try:
                return original(autotuner, *args, **kwargs)
            finally:
                recorder._tuning_depth -= 1

        return _bench

    def _on_launch(self, metadata: Any) -> None:
        # Runs inside the C launcher: it must never raise, or the candidate's launch would fail.
        try:
            if self._tuning_depth:
                return
            data = getattr(metadata, "data", metadata)
            name = data["name"] if isinstance(data, Mapping) else getattr(metadata, "name", "?")
            _bump(self.hook_counts, str(name))
        except Exception:
            _bump(self.hook_counts, "?")

    def _launch_hook_site(self, triton: Any) -> tuple[_Patch | None, Any]:
        """Where this Triton calls launch hooks: a HookChain (3.6, 3.9) or a single-callable slot."""
        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        current = getattr(runtime, "launch_enter_hook", None)
        if callable(getattr(current, "add", None)) and isinstance(getattr(current, "calls", None), list):
            return None, current
        if runtime is not None and hasattr(runtime, "launch_enter_hook"):
            return _patch(runtime, "launch_enter_hook", self._chained_hook(current)), None
        from triton.compiler.compiler import CompiledKernel

        if hasattr(CompiledKernel, "launch_enter_hook"):
            previous = CompiledKernel.launch_enter_hook
            return _patch(CompiledKernel, "launch_enter_hook", self._chained_hook(previous)), None
        return None, None

    def _chained_hook(self, previous: Any) -> Callable[[Any], None]:
        def launch_enter_hook(metadata: Any) -> None:
            self._on_launch(metadata)
            if previous is not None:
                previous(metadata)

        return launch_enter_hook

    # -- describing a launch --------------------------------------------------------------------------

    def _describe(self, kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """Record the launch's specialisation if new; return the kernel name. Never raises."""
        name = str(getattr(getattr(kernel, "fn", None), "__name__", type(kernel).__name__))
        # Every launch comes through here and a GPU launch costs ~10 us, so a repeat must be cheap: it
        # is recognised by a key at least as fine as Triton's specialisation (tensors by dtype and
        # 16-byte alignment, everything else by value) before Triton's binder runs.
        seen_key: tuple[Any, ...] | None = _seen_key(kernel, args, kwargs)
        try:
            if seen_key in self._seen:
                return name
        except TypeError:  # an unhashable argument: describe the launch in full every time
            seen_key = None
        try:
            launch_kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
            bound, specialisation, _ = self._binder(kernel)(*args, **launch_kwargs)
            launch = self._launch_from(name, bound, specialisation, kwargs)
        except Exception as exc:
            self.record_errors.setdefault(name, one_line(exc))
            return name
        if seen_key is not None:
            self._seen.add(seen_key)  # the kernel stays referenced in _kernels, so its id is not reused
        key = launch.specialisation
        if key not in self._kernels:
            self._kernels[key] = kernel
            self.launches.append(launch)
        return name

    def _binder(self, kernel: Any) -> Callable[..., Any]:
        # Triton's own binder (create_function_from_signature) is what JITFunction.run uses to turn
        # arguments into (bound args, [(type, attribute)]): reusing it gives the same types and the same
        # int==1 / None / alignment specialisations in both modes and both Triton versions.
        cached = self._binders.get(id(kernel))
        if cached is not None and cached[0] is kernel:
            binder: Callable[..., Any] = cached[1]
            return binder
        from triton.backends.compiler import BaseBackend
        from triton.runtime.jit import JITFunction, KernelParam, create_function_from_signature

        if isinstance(kernel, JITFunction):
            signature, params = kernel.signature, kernel.params
        else:
            signature = inspect.signature(kernel.fn)
            options = getattr(kernel, "kwargs", {}) or {}
            no_spec = set(options.get("do_not_specialize") or ())
            no_align = set(options.get("do_not_specialize_on_alignment") or ())
            params = [
                KernelParam(i, p, i in no_spec or p.name in no_spec, i in no_align or p.name in no_align)
                for i, p in enumerate(signature.parameters.values())
            ]
        binder = create_function_from_signature(signature, params, BaseBackend)
        self._binders[id(kernel)] = (kernel, binder)
        return binder

    @staticmethod
    def _launch_from(
        name: str, bound: dict[str, Any], specialisation: list[Any], kwargs: dict[str, Any]
    ) -> TritonLaunch:
        signature: list[tuple[str, str]] = []
        constexprs: list[tuple[str, ConstexprValue]] = []
        aligned: list[str] = []
        dtypes: list[str] = []
        unrebuildable: list[str] = []
        for arg_name, (raw_type, attr) in zip(bound, specialisation, strict=True):
            ty = str(raw_type)
            if not isinstance(raw_type, str):  # a tuple argument: nested types that ASTSource flattens
                unrebuildable.append(arg_name)
            signature.append((arg_name, ty))
            if ty == "constexpr":
                value, kind = _constexpr_value(bound[arg_name])
                constexprs.append((arg_name, value))
                if kind == "dtype":
                    dtypes.append(arg_name)
                elif kind == "opaque":
                    unrebuildable.append(arg_name)
            elif isinstance(attr, str) and "D" in attr:
                aligned.append(arg_name)
        grid = kwargs.get("grid")
        if callable(grid):
            grid = grid(bound)
        maxnreg = kwargs.get("maxnreg")
        return TritonLaunch(
            kernel_name=name,
            grid=tuple(int(g) for g in grid) if grid is not None else (),
            num_warps=int(kwargs.get("num_warps") or DEFAULT_NUM_WARPS),
            num_stages=int(kwargs.get("num_stages") or DEFAULT_NUM_STAGES),
            signature=tuple(signature),
            constexprs=tuple(constexprs),
            divisible_by_16=tuple(aligned),
            dtype_constexprs=tuple(dtypes),
            unrebuildable=tuple(unrebuildable),
            maxnreg=int(maxnreg) if maxnreg is not None else None,
        )


@contextlib.contextmanager
def record_triton_launches() -> Iterator[LaunchRecorder]:
    """``with record_triton_launches() as rec:`` installs a recorder and always uninstalls it."""
    recorder = LaunchRecorder().install()
    try:
        yield recorder
    finally:
        recorder.uninstall()


_SCALAR_TYPES: Final = frozenset((int, float, bool, str, type(None)))


def _seen_key(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A key at least as fine as Triton's specialisation of this launch, cheap to build."""
    parts: list[Any] = [id(kernel)]
    for value in args:
        parts.append(value if type(value) in _SCALAR_TYPES else _quick_key(value))
    for name, value in kwargs.items():
        if name != "grid":
            parts.append(name)
            parts.append(value if type(value) in _SCALAR_TYPES else _quick_key(value))
    return tuple(parts)


def _quick_key(value: Any) -> Any:
    """What of one argument can change its specialisation: a tensor's dtype and 16-byte alignment."""
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None:
        return (getattr(value, "dtype", None), data_ptr() % 16 == 0)
    if type(value) is tuple:
        return tuple(map(_quick_key, value))
    return value


def _constexpr_value(value: Any) -> tuple[ConstexprValue, Literal["scalar", "dtype", "opaque"]]:
    """A constexpr as a JSON scalar, and how to rebuild it."""
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value, "scalar"
    if isinstance(value, tl.dtype):
        return str(value), "dtype"
    if callable(getattr(value, "item", None)) and getattr(value, "ndim", None) == 0:
        # numpy / torch scalars: plain numbers once unwrapped
        item = value.item()
        if isinstance(item, bool | int | float):
            return item, "scalar"
    return repr(value), "opaque"


# -- compiling a recorded launch ------------------------------------------------------------------------
