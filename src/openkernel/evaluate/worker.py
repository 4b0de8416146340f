"""Worker process entry point: ``python -m openkernel.evaluate.worker {reference|candidate}``.

The *reference* worker imports the problem, makes inputs from seeds the parent chose, computes
the expected outputs, traces the reference's aten ops and times the baseline. The *candidate*
worker imports the candidate, receives each trial's seeds (and each timed call's noise seed)
only when it is due, runs, times and sends back its outputs. Neither decides anything: every
frame goes to the parent, which compares and judges. Any exception becomes an ``error`` frame
with the stage it happened in; the process then exits.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

# harness must be imported before any candidate code: it captures the functions it relies on.
from openkernel.evaluate import harness as h
from openkernel.evaluate.channel import Channel, ChannelError, Frame, encode_tensors
from openkernel.evaluate.compare import check_output, tolerance_for
from openkernel.evaluate.launches import LaunchCounter

_ERROR_TAIL = 4000


class StageError(Exception):
    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(stage)
        self.stage = stage
        self.exc = exc


def _setup_device(name: str) -> torch.device:
    device = torch.device(name)
    # The problem's precision, explicitly: no silent TF32 for fp32 matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    return device


def _device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index or 0} ({torch.cuda.get_device_name(device)})"
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    return "cpu (Triton interpreter)" if interp else "cpu"


def _outputs(value: Any) -> tuple[str, list[Any]]:
    """Normalise a forward's return value: ("tensor", [t]) or ("tuple", [..]) or ("other", [])."""
    if isinstance(value, tuple | list):
        return "tuple", list(value)
    return ("tensor", [value]) if isinstance(value, torch.Tensor) else ("other", [])


def _describe(values: list[Any]) -> list[dict[str, Any]]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(
                {
                    "type": f"{type(v).__module__}.{type(v).__qualname__}",
                    "dtype": str(v.dtype).removeprefix("torch."),
                    "shape": list(v.shape),
                    "device": str(v.device),
                }
            )
        else:
            out.append({"type": f"{type(v).__module__}.{type(v).__qualname__}"})
    return out


def _send_outputs(ch: Channel, header: dict[str, Any], value: Any) -> None:
    structure, values = _outputs(value)
    described = _describe(values)
    plain = [v for v in values if type(v) is torch.Tensor]  # exact type: a subclass does not travel
    sendable = len(plain) == len(values) and structure != "other"
    metas, parts = encode_tensors(plain) if sendable else ([], [])
    ch.send(
        {**header, "structure": structure, "outputs": described, "tensors": metas, "sendable": sendable},
        parts,
    )


def _output_bytes(value: Any) -> int:
    _, values = _outputs(value)
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


# --------------------------------------------------------------------------------------- reference


def run_reference(ch: Channel, job: dict[str, Any]) -> None:
    device = _setup_device(job["device"])
    try:
        problem = h.import_file(Path(job["problem"]), "openkernel_problem")
        h.apply_sizes(problem, job["sizes"], only_existing=False)
    except BaseException as exc:
        raise StageError("import", exc) from exc
    atol, rtol = getattr(problem, "ATOL", None), getattr(problem, "RTOL", None)
    ch.send(
        {
            "kind": "ready",
            "device": _device_label(device),
            "torch": torch.__version__,
            "atol": float(atol) if atol is not None else None,
            "rtol": float(rtol) if rtol is not None else None,
        }
    )
    models: list[torch.nn.Module] = []
    pool: list[list[Any]] = []
    with h.no_grad():
        for index, trial in enumerate(job["trials"]):
            try:
                model = h.build_model(problem, problem.Model, trial["weight_seed"]).to(device)
                inputs = h.build_inputs(problem, trial["input_seed"], device)
                recorder = h.OpRecorder() if index == 0 else None
                if recorder is not None:
                    with recorder:
                        value = model(*inputs)
                else:
                    value = model(*inputs)
            except BaseException as exc:
                raise StageError("reference forward", exc) from exc
            if recorder is not None:
                ch.send({"kind": "ops", "aten_ops": sorted(recorder.ops)})
            _send_outputs(
                ch,
                {
                    "kind": "trial",
                    "index": index,
                    "has_weights": len(model.state_dict()) > 0,
                    "input_bytes": _input_bytes(inputs),
                    "controls_pass": _negative_controls(value, inputs, atol, rtol),
                },
                value,
            )
            if index == 0:
                ch.send({"kind": "work", **_count_work(problem, model, trial["input_seed"], device)})
            models.append(model)
            pool.append(inputs)
        timing = job["timing"]
        flush_buf = h.l2_flush_buffer(device)
        model = models[0]
        samples: list[h.SampleTiming] = []
        checked = set(timing["checked"])
        for i, (pool_index, noise_seed) in enumerate(timing["schedule"]):
            inputs = h.materialize(pool[pool_index], noise_seed, device)
            value, t = h.time_call(functools.partial(model, *inputs), device, functools.partial(h.flush, flush_buf))
            if i >= timing["warmup"]:
                samples.append(t)
            if i in checked:
                _send_outputs(ch, {"kind": "checked", "sample": i}, value)
            del value, inputs
        ch.send({"kind": "timing", **_timing_payload(samples, device)})
        if job.get("compile_baseline"):
            ch.send({"kind": "compile_timing", **_compile_baseline(model, pool, timing, device, flush_buf)})
    ch.send({"kind": "done"})


def _count_work(problem: Any, model: torch.nn.Module, input_seed: int, device: torch.device) -> dict[str, Any]:
    """FLOPs and minimal bytes of one reference forward, on fresh inputs (forward may mutate its own)."""
    from openkernel.profile import count_work

    try:
        fresh = h.build_inputs(problem, input_seed, device)
        return {"ok": True, **count_work(model, fresh).to_json()}
    except Exception as exc:  # counting is a view on the problem; it never fails the evaluation
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


def _negative_controls(value: Any, inputs: list[Any], atol: Any, rtol: Any) -> list[str]:
    """Trivial answers that pass this problem's check: all zeros, or the first input returned as is.

    A problem where either passes cannot tell a real kernel from a lazy one; the parent flags it.
    """
    if not isinstance(value, torch.Tensor):
        return []
    expected = value.detach().cpu()
    tol = tolerance_for(expected.dtype, atol, rtol)
    passing = []
    if check_output(expected, torch.zeros_like(expected), tol).passed:
        passing.append("an all-zeros output")
    first = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
    same_kind = first is not None and first.shape == expected.shape and first.dtype == expected.dtype
    if same_kind and first is not None and check_output(expected, first.detach().cpu(), tol).passed:
        passing.append("returning the input unchanged")
    return passing


def _timing_payload(samples: list[h.SampleTiming], device: torch.device) -> dict[str, Any]:
    return {
        "method": "cuda_events" if device.type == "cuda" else "wall_clock",
        "event_ms": [s.event_ms for s in samples],
        "synced_ms": [s.synced_ms for s in samples] if device.type == "cuda" else None,
        "wall_ms": [s.wall_ms for s in samples],
    }


def _compile_baseline(
    model: torch.nn.Module,
    pool: list[list[Any]],
    timing: dict[str, Any],
    device: torch.device,
    flush_buf: torch.Tensor | None,
) -> dict[str, Any]:
    try:
        compiled = torch.compile(model)
        samples = []
        for i, (pool_index, noise_seed) in enumerate(timing["schedule"]):
            inputs = h.materialize(pool[pool_index], noise_seed, device)
            _, t = h.time_call(functools.partial(compiled, *inputs), device, functools.partial(h.flush, flush_buf))
            if i >= timing["warmup"]:
                samples.append(t)
        return {"ok": True, **_timing_payload(samples, device)}
    except Exception as exc:  # torch.compile failing is a note, not a failed evaluation
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


# --------------------------------------------------------------------------------------- candidate


def run_candidate(ch: Channel, job: dict[str, Any]) -> None:
    device = _setup_device(job["device"])
    guard = h.Guard()
    launches = LaunchCounter()
    try:
        problem = h.import_file(Path(job["problem"]), "openkernel_problem")
        h.apply_sizes(problem, job["sizes"], only_existing=False)
    except BaseException as exc:
        raise StageError("reference import", exc) from exc
    try:
        with launches.building(Path(job["cache_dir"]), job["cuda_mode"], float(job["build_timeout_s"])):
            candidate = h.import_file(Path(job["candidate"]), "openkernel_candidate")
    except BaseException as exc:
        raise StageError("import", exc) from exc
    model_cls = getattr(candidate, "ModelNew", None)
    if not isinstance(model_cls, type):
        ch.send(
            {
                "kind": "error",
                "stage": "import",
                "error_type": "NoModelNew",
                "message": "the candidate defines no class ModelNew (it must define class ModelNew(nn.Module))",
                "traceback": "",
            }
        )
        return
    h.apply_sizes(candidate, job["sizes"], only_existing=True)
    guard.watch_intact("the Triton launch recorder", launches.intact)
    ch.send({"kind": "ready", "device": _device_label(device), "replaced": guard.replaced()})
    session = _CandidateSession(ch, problem, model_cls, device, guard, launches)
    with h.no_grad():
        session.serve()


class _CandidateSession:
    """Serves the parent's requests one at a time: trials, timed calls, pings, batches."""

    def __init__(
        self,
        ch: Channel,
        problem: Any,
        model_cls: Any,
        device: torch.device,
        guard: h.Guard,
        launches: LaunchCounter,
    ) -> None:
        self.ch = ch
        self.problem = problem
        self.model_cls = model_cls
        self.device = device
        self.guard = guard
        self.launches = launches
        self.model: torch.nn.Module | None = None  # trial 0's, used for every timed call
        self.pool: list[list[Any]] = []  # each trial's inputs, untouched by the candidate
        self.flush_buf = h.l2_flush_buffer(device)
        self._given: list[Any] | None = None  # input buffers reused by every timed call

    def serve(self) -> None:
        while True:
            msg = self.ch.recv()
            if msg.kind == "trial":
                self.trial(msg)
            elif msg.kind == "sample":
                self.launches.stop_recording()  # correctness proved the launches; time without the recorder
                self.sample(msg)
            elif msg.kind == "ping":
                self.ch.send({"kind": "pong"})
            elif msg.kind == "batch":
                self.batch(int(msg.header["calls"]))
            elif msg.kind == "finish":
                self.launches.stop_recording()
                # Without a GPU, compile what the interpreter ran for a real target (sm_90).
                checks = self.launches.compile_checks(90) if self.device.type == "cpu" else []
                self.ch.send(
                    {
                        "kind": "done",
                        "launches": self.launches.counts(),
                        "replaced": self.guard.replaced(),
                        "target_compiles": checks,
                    }
                )
                # Stay alive until the parent says "exit": meanwhile our children are still ours to find.
                with contextlib.suppress(ChannelError):
                    self.ch.recv(time.monotonic() + 30)
                return
            else:
                raise StageError("protocol", ValueError(f"unexpected message {msg.kind!r}"))

    def trial(self, msg: Frame) -> None:
        index = int(msg.header["index"])
        weight_seed = int(msg.header["weight_seed"])
        try:
            reference = h.build_model(self.problem, self.problem.Model, weight_seed)
            model = h.build_model(self.problem, self.model_cls, weight_seed)
            shared = h.share_weights(reference, model)
            del reference
            model = model.to(self.device)
        except BaseException as exc:
            raise StageError("init", exc) from exc
        inputs = h.build_inputs(self.problem, int(msg.header["input_seed"]), self.device)
        given = h.snapshot(inputs)
        h.poison_allocator(4 * _input_bytes(inputs) + (64 << 20), self.device)
        recorder = h.OpRecorder() if index == 0 else None
        before = self.launches.total()
        try:
            if recorder is not None:
                with recorder:
                    value = model(*given)
            else:
                value = model(*given)
        except BaseException as exc:
            raise StageError("forward", exc) from exc
        late_write = _late_write(value, self.device)
        if self.model is None:
            self.model = model
        self.pool.append(inputs)
        _send_outputs(
            self.ch,
            {
                "kind": "trial_output",
                "index": index,
                "weights_shared": shared,
                "launches_in_call": self.launches.total() - before,
                "aten_ops": sorted(recorder.ops) if recorder is not None else None,
                "input_modified": not h.unchanged(inputs, given),
                "late_write": late_write,
                "replaced": self.guard.replaced(),
            },
            value,
        )

    def sample(self, msg: Frame) -> None:
        assert self.model is not None
        model = self.model
        index = int(msg.header["index"])
        inputs = h.materialize(self.pool[int(msg.header["pool"])], int(msg.header["noise_seed"]), self.device)
        given = self._timed_buffers(inputs)
        h.poison_allocator(2 * _input_bytes(inputs), self.device)
        try:
            value, t = h.time_call(
                functools.partial(model, *given), self.device, functools.partial(h.flush, self.flush_buf)
            )
        except BaseException as exc:
            raise StageError("timed forward", exc) from exc
        kept = _snapshot_outputs(value)
        self.ch.send(
            {
                "kind": "sample_done",
                "index": index,
                "event_ms": t.event_ms,
                "synced_ms": t.synced_ms,
                "wall_ms": t.wall_ms,
                "input_modified": not h.unchanged(inputs, given),
                "replaced": self.guard.replaced(),
            }
        )
        reply = self.ch.recv()
        if reply.kind == "keep" and reply.header.get("keep"):
            _send_outputs(self.ch, {"kind": "sample_output", "index": index}, kept)

    def _timed_buffers(self, inputs: list[Any]) -> list[Any]:
        """The same input buffers for every timed call, refilled in place with the new content.

        Fresh content at a fixed address: a cache keyed on pointers (or shapes) hits every time and
        returns a stale answer, which the checked calls catch.
        """
        given = self._given
        same = given is not None and all(
            isinstance(g, torch.Tensor) == isinstance(x, torch.Tensor)
            and (not isinstance(x, torch.Tensor) or (g.shape == x.shape and g.dtype == x.dtype))
            for g, x in zip(given, inputs, strict=True)
        )
        if given is None or not same:
            self._given = h.snapshot(inputs)
            return self._given
        for g, x in zip(given, inputs, strict=True):
            if isinstance(x, torch.Tensor):
                g.copy_(x)
        return [x if not isinstance(x, torch.Tensor) else g for g, x in zip(given, inputs, strict=True)]

    def batch(self, calls: int) -> None:
        """``calls`` back-to-back calls over the trial inputs and one sync: the parent times this itself."""
        assert self.model is not None
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        for i in range(calls):
            self.model(*self.pool[i % len(self.pool)])
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.ch.send({"kind": "batch_done"})


def _late_write(value: Any, device: torch.device) -> bool:
    """On a GPU: did the output change after the harness stream finished the call's work?

    The early copy is ordered after everything the call queued on the harness stream; the late
    one after a device-wide sync. A difference means work landed from another stream or thread.
    """
    if device.type != "cuda":
        return False
    _, values = _outputs(value)
    tensors = [v for v in values if isinstance(v, torch.Tensor) and v.is_cuda]
    early = [t.detach().clone() for t in tensors]
    torch.cuda.synchronize()
    return any(not h.tensors_identical(e, t.detach()) for e, t in zip(early, tensors, strict=True))


def _snapshot_outputs(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor:
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(v.detach().clone() if type(v) is torch.Tensor else v for v in value)
    return value


def _input_bytes(inputs: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))


# --------------------------------------------------------------------------------------- main


def _error_frame(stage: str, exc: BaseException) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(exc))
    return {
        "kind": "error",
        "stage": stage,
        "error_type": type(exc).__name__,
        "error_module": type(exc).__module__,
        "message": str(exc)[:_ERROR_TAIL],
        "traceback": tb[-_ERROR_TAIL:],
        "in_triton": "triton" in tb and ("/triton/" in tb or "triton." in type(exc).__module__),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="openkernel.evaluate.worker")
    parser.add_argument("role", choices=["reference", "candidate"])
    parser.add_argument("--rfd", type=int, required=True)
    parser.add_argument("--wfd", type=int, required=True)
    args = parser.parse_args(argv)
    secret = Channel.read_secret(args.rfd)
    ch = Channel(args.rfd, args.wfd, secret)
    job = ch.recv().header
    try:
        if args.role == "reference":
            run_reference(ch, job)
        else:
            run_candidate(ch, job)
    except StageError as err:
        ch.send(_error_frame(err.stage, err.exc))
        return 1
    except BaseException as exc:
        ch.send(_error_frame("harness", exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
