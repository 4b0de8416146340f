"""What runs inside a worker process, shared by the reference and candidate roles.

Nothing here decides a verdict: workers produce outputs and raw timings; the parent compares.
The candidate worker uses these functions *after* importing untrusted code, so every function
and class it relies on is captured at import time of this module (before the candidate's) and
:class:`Guard` reports any that were replaced.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "GLUE_OPS",
    "Guard",
    "OpRecorder",
    "OutputProbe",
    "SampleTiming",
    "apply_sizes",
    "build_inputs",
    "build_model",
    "import_file",
    "materialize",
    "poison_allocator",
    "time_call",
]

# Captured before any candidate code is imported (the worker imports this module first).
_perf_counter = time.perf_counter
_torch_equal = torch.equal
_torch_empty = torch.empty
_manual_seed = torch.manual_seed
_torch_device = torch.device
_randint = torch.randint
_generator = torch.Generator
_getitem = torch.Tensor.__getitem__
_clone = torch.Tensor.clone
_urandom = os.urandom
# GPU clock cycles the device sleeps before a timed call (~1 ms at 2 GHz): time for the host to queue it.
# Measured on an H200 host: queuing a Triton candidate's forward takes the host 80-190 us, so with the
# earlier 0.1 ms most timed calls started before they were queued and host time leaked into them
# (medians 15-20% apart between processes); with 1 ms none did, under a 16-process CPU load too.
_HOST_LEAD_CYCLES = 2_000_000
# The same for the output probe's second read (~0.1 ms): a few small launches.
_PROBE_LEAD_CYCLES = 200_000

# Aten ops that move, view, allocate or fill memory. A candidate may call these freely; any other
# op the reference also calls is "the reference's compute".
GLUE_OPS = frozenset(
    f"aten.{name}"
    for name in [
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "contiguous",
        "clone",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "fill_",
        "fill",
        "zero_",
        "copy_",
        "_to_copy",
        "to",
        "detach",
        "alias",
        "as_strided",
        "slice",
        "select",
        "unsqueeze",
        "squeeze",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "lift_fresh",
        "resize_",
        "set_",
        "_local_scalar_dense",
        "item",
        "is_nonzero",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "view_as",
        "flatten",
        "unflatten",
        "narrow",
        "index_select",
        "arange",
        "scalar_tensor",
        "_has_compatible_shallow_copy_type",
    ]
)


def import_file(path: Path, module_name: str) -> ModuleType:
    """Import a Python file as a module (registered in ``sys.modules``, so Triton can read its source)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def apply_sizes(module: ModuleType, sizes: Sequence[tuple[str, Any]], only_existing: bool) -> None:
    """Assign a problem's SMALL_SIZES to module constants (the candidate's only where it has them)."""
    for name, value in sizes:
        if not only_existing or hasattr(module, name):
            setattr(module, name, value)


def build_model(problem: ModuleType, cls: Callable[..., torch.nn.Module], weight_seed: int) -> torch.nn.Module:
    """Construct ``cls`` from the problem's init inputs under ``weight_seed`` (KernelBench's rule)."""
    _manual_seed(weight_seed)
    init_inputs = list(problem.get_init_inputs())
    _manual_seed(weight_seed)
    return cls(*init_inputs)


def share_weights(reference: torch.nn.Module, candidate: torch.nn.Module) -> bool:
    """Copy the reference's parameters and buffers into the candidate when names and shapes agree."""
    ref_sd = reference.state_dict()
    cand_sd = candidate.state_dict()
    if not ref_sd or ref_sd.keys() != cand_sd.keys():
        return False
    if any(ref_sd[k].shape != cand_sd[k].shape for k in ref_sd):
        return False
    candidate.load_state_dict(ref_sd)
    return True


def build_inputs(problem: ModuleType, input_seed: int, device: torch.device) -> list[Any]:
    """The problem's own ``get_inputs()`` under a fresh seed, moved to ``device``.

    On a GPU, ``get_inputs()`` runs with the GPU as torch's default device, so its factory calls
    (``torch.randn(...)``) make the tensors there directly: a 256 MiB input costs milliseconds
    instead of seconds of CPU time. Both workers use the same device and seed, so they still get
    the same bytes. A problem that names ``device="cpu"`` explicitly still works (it is moved).
    """
    _manual_seed(input_seed)
    with _torch_device(device) if device.type == "cuda" else contextlib.nullcontext():
        values = list(problem.get_inputs())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def materialize(pool: Sequence[Any], noise_seed: int, device: torch.device) -> list[Any]:
    """Fresh content for one timed call: a pool input set times elementwise noise in [0.9, 1.1].

    The noise is new for every call, so no cache keyed on pointers, shapes or content can serve a
    timed call, and it is cheap on the device (no ``get_inputs()`` per call). Integer and boolean
    inputs (indices, masks) are copied unchanged. Same seed and device give the same bytes in the
    reference and the candidate worker.
    """
    gen = torch.Generator(device=device)
    gen.manual_seed(noise_seed)
    out: list[Any] = []
    for value in pool:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            noise = torch.rand(value.shape, generator=gen, device=device, dtype=torch.float32)
            out.append((value.float() * (0.9 + 0.2 * noise)).to(value.dtype).contiguous())
        elif isinstance(value, torch.Tensor):
            out.append(value.clone())
        else:
            out.append(value)
    return out


def poison_allocator(nbytes: int, device: torch.device) -> None:
    """Fill memory the allocator will hand out next with 0xFF (NaN in every float type), then free it.

    A kernel that leaves part of a ``torch.empty`` output unwritten then returns NaN there instead
    of whatever an earlier computation left behind.
    """
    if nbytes <= 0:
        return
    block = _torch_empty(nbytes, dtype=torch.uint8, device=device)
    block.fill_(255)
    del block


class OpRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the names of the aten ops dispatched while active (``aten._softmax``, ``aten.mm``)."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: set[str] = set()

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def compute_ops(ops: set[str]) -> set[str]:
    return {op for op in ops if op not in GLUE_OPS}


class Guard:
    """Holds the harness's functions as they were before the candidate ran, and names replacements."""

    def __init__(self) -> None:
        self._watched: list[tuple[str, object, str, object]] = []  # (label, owner, attribute, original)
        self._intact: list[tuple[str, Callable[[], bool]]] = []
        import time as time_mod

        targets: list[tuple[str, object, tuple[str, ...]]] = [
            ("time", time_mod, ("perf_counter", "perf_counter_ns", "monotonic", "time")),
            ("builtins", builtins, ("type", "isinstance")),
            ("gc", gc, ("collect",)),
            (
                "torch",
                torch,
                ("allclose", "equal", "isclose", "empty", "empty_like", "randn", "rand", "randint", "Generator"),
            ),
            ("torch.testing", torch.testing, ("assert_close",)),
            (
                "torch.Tensor",
                torch.Tensor,
                ("clone", "copy_", "to", "cpu", "contiguous", "view", "__eq__", "__getitem__", "numpy"),
            ),
            ("os", os, ("urandom",)),
            ("torch.cuda", torch.cuda, ("synchronize", "Event", "current_stream")),
            ("torch.cuda.Event", torch.cuda.Event, ("elapsed_time", "record", "synchronize")),
        ]
        triton = sys.modules.get("triton")
        if triton is not None and hasattr(triton, "testing"):
            targets.append(("triton.testing", triton.testing, ("do_bench",)))
        for label, owner, attrs in targets:
            for attr in attrs:
                if hasattr(owner, attr):
                    self._watched.append((f"{label}.{attr}", owner, attr, getattr(owner, attr)))

    def watch_intact(self, name: str, intact: Callable[[], bool]) -> None:
        """Also report ``name`` as replaced whenever ``intact()`` turns false (e.g. the launch recorder)."""
        self._intact.append((name, intact))

    def replaced(self) -> list[str]:
        out = [name for name, intact in self._intact if not intact()]
        missing = object()
        out += [
            label for label, owner, attr, original in self._watched if getattr(owner, attr, missing) is not original
        ]
        return out


def tensors_identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals NaN with the same bits), with the harness's own torch.equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(_torch_equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def snapshot(values: Sequence[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def unchanged(before: Sequence[Any], after: Sequence[Any]) -> bool:
    for b, a in zip(before, after, strict=True):
        if isinstance(b, torch.Tensor) and not tensors_identical(b, a):
            return False
    return True


class SampleTiming:
    """One timed call: the stream-event time, the time to a device-wide sync, host wall time, whether
    the GPU reached the call before the host had finished queuing it (``late``), and ``sync_ms``: the
    same device-wide sync with nothing left to wait for (the host's round trip at that moment).

    With an output probe (:class:`OutputProbe`): ``probe_ms``, the GPU time from the call's end event
    to the end of the probe's reads; ``probe_idle_ms``, the same reads' GPU time again with nothing
    else pending; ``probe_queued``, whether the host had queued the probe before the GPU reached the
    call's end (else ``probe_ms`` includes host time); ``written_late``, whether a probed output
    element changed after the probe read it.
    """

    __slots__ = (
        "event_ms",
        "late",
        "probe_idle_ms",
        "probe_ms",
        "probe_queued",
        "sync_ms",
        "synced_ms",
        "wall_ms",
        "written_late",
    )

    def __init__(
        self,
        event_ms: float,
        synced_ms: float | None,
        wall_ms: float,
        late: bool = False,
        sync_ms: float | None = None,
    ) -> None:
        self.event_ms = event_ms
        self.synced_ms = synced_ms
        self.wall_ms = wall_ms
        self.late = late
        self.sync_ms = sync_ms
        self.probe_ms: float | None = None
        self.probe_idle_ms: float | None = None
        self.probe_queued: bool | None = None
        self.written_late: bool | None = None


# Output elements the probe reads per tensor: all of a small one, else this many at random positions.
PROBE_ELEMENTS = 8192


class OutputProbe:
    """Reads output elements right after a timed call's end event, on the harness stream.

    A call must leave its output complete on the harness stream. Work hidden from the timer on
    another stream either writes output elements after the probe has read them (the read differs
    from the same elements after a device-wide sync: ``changed()``), or holds the GPU so that the
    probe's kernels cannot run (the probe's GPU time grows). The positions are drawn after the call
    has returned, from the OS's entropy, so the call cannot know which ones will be read.
    """

    def __init__(self, tensors: Sequence[torch.Tensor], device: torch.device) -> None:
        self._reads: list[tuple[torch.Tensor, Callable[[], torch.Tensor]]] = []
        gen = _generator(device=device)
        gen.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
        for t in (tensor.detach() for tensor in tensors):
            if t.numel() == 0:
                continue
            if t.numel() <= PROBE_ELEMENTS:
                read: Callable[[], torch.Tensor] = functools.partial(_clone, t)
            elif t.is_contiguous():
                flat = t.view(-1)
                index = _randint(0, t.numel(), (PROBE_ELEMENTS,), device=device, generator=gen)
                read = functools.partial(_getitem, flat, index)
            else:
                where = tuple(_randint(0, n, (PROBE_ELEMENTS,), device=device, generator=gen) for n in t.shape)
                read = functools.partial(_getitem, t, where)
            self._reads.append((read(), read))

    def read_again(self) -> list[torch.Tensor]:
        """The same elements read once more (queued on the current stream)."""
        return [read() for _, read in self._reads]

    def changed(self, again: Sequence[torch.Tensor] | None = None) -> bool:
        """After a device-wide sync: does any probed element differ (bitwise) from what the probe read?"""
        later = self.read_again() if again is None else again
        return any(not tensors_identical(early, now) for (early, _), now in zip(self._reads, later, strict=True))


def time_call(
    call: Callable[[], Any],
    device: torch.device,
    before: Callable[[], None] | None = None,
    probe_outputs: Callable[[Any], Sequence[torch.Tensor]] | None = None,
) -> tuple[Any, SampleTiming]:
    """Run ``call`` once and time it; ``before`` (the L2 flush) runs first, outside the timed region.

    On a GPU: CUDA events on the harness stream around the call, then a device-wide synchronize
    and a second end event, so work the call left on other streams shows up as a gap between the
    two times; the same sync once more with nothing pending (``sync_ms``) says how much of that gap
    is the host's own round trip. The device is idle before ``before``; a device-side sleep after it
    keeps the start event from firing until the host has queued the call (up to ~1 ms of Python and
    launch overhead is hidden, as with back-to-back launches in a real program). Whether that held is
    checked: if the start event has already fired when the host is done queuing, the sample is
    ``late`` (its time includes host time: a host-bound call, or a host the OS descheduled).
    ``probe_outputs`` (the candidate's calls) names the result's tensors for an :class:`OutputProbe`,
    queued right after the end event and checked after the device-wide sync. Without a GPU: the
    host's wall clock.
    """
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
        if before is not None:
            before()
        torch.cuda._sleep(_HOST_LEAD_CYCLES)  # type: ignore[no-untyped-call]
        t0 = _perf_counter()
        start.record()
        result = call()
        end.record()
        late = bool(start.query())  # type: ignore[no-untyped-call]
        probe = probe_end = None
        probe_queued = False
        if probe_outputs is not None:
            probe = OutputProbe(probe_outputs(result), device)
            probe_end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            probe_end.record()
            probe_queued = not end.query()  # type: ignore[no-untyped-call]
        end_synced = _synced_after(probe_end or end)
        wall_ms = (_perf_counter() - t0) * 1e3
        idle = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        idle.record()
        sync_ms = idle.elapsed_time(_synced_after(idle))
        timing = SampleTiming(start.elapsed_time(end), start.elapsed_time(end_synced), wall_ms, late, sync_ms)
        if probe is not None and probe_end is not None:
            timing.probe_ms = end.elapsed_time(probe_end)
            timing.probe_queued = probe_queued
            # The same reads with nothing else on the GPU, queued behind a short device sleep as the
            # first ones were behind the call: what the probe costs by itself, however many outputs.
            torch.cuda._sleep(_PROBE_LEAD_CYCLES)  # type: ignore[no-untyped-call]
            again_start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            again_end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            again_start.record()
            again = probe.read_again()
            again_end.record()
            again_end.synchronize()
            timing.probe_idle_ms = again_start.elapsed_time(again_end)
            timing.written_late = probe.changed(again)
        return result, timing
    if before is not None:
        before()
    t0 = _perf_counter()
    result = call()
    wall_ms = (_perf_counter() - t0) * 1e3
    return result, SampleTiming(wall_ms, None, wall_ms)


def _synced_after(event: torch.cuda.Event) -> torch.cuda.Event:
    """An event recorded after ``event`` and then a device-wide synchronize (work on every stream done).

    The host spins until ``event`` is reached, so a blocking synchronize's wake-up (~0.1 ms on a busy
    host) does not sit between the two events.
    """
    while not event.query():  # type: ignore[no-untyped-call]
        pass
    torch.cuda.synchronize()
    after = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    after.record()
    after.synchronize()
    return after


def l2_flush_buffer(device: torch.device) -> torch.Tensor | None:
    """A buffer twice the device's L2 (written between timed calls so no call starts with warm L2)."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024)
    return _torch_empty(2 * l2, dtype=torch.uint8, device=device)


def flush(buffer: torch.Tensor | None) -> None:
    if buffer is not None:
        buffer.fill_(1)
