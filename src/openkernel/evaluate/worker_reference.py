"""The reference worker: the problem's expected outputs, its aten ops, its work, and the baseline timing.

Trusted code (the problem file is the user's own). It never sees the candidate. It starts and
imports the problem off the GPU (``ready``) and waits for the parent's ``go`` (the parent holds the
GPU shared by then); it sends the trials' outputs (``trials_done``), then waits for ``time``: the
parent takes the GPU for itself before any timing starts.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from openkernel.evaluate import harness as h
from openkernel.evaluate.channel import Channel
from openkernel.evaluate.compare import passes, tolerance_for
from openkernel.evaluate.worker_common import (
    StageError,
    device_label,
    input_bytes,
    send_outputs,
    setup_device,
    snapshot_outputs,
)

__all__ = ["run_reference"]


def run_reference(ch: Channel, job: dict[str, Any]) -> None:
    try:
        problem = h.import_file(Path(job["problem"]), "openkernel_problem")
        h.apply_sizes(problem, job["sizes"], only_existing=False)
    except BaseException as exc:
        raise StageError("import", exc) from exc
    atol, rtol = getattr(problem, "ATOL", None), getattr(problem, "RTOL", None)
    ch.send(
        {
            "kind": "ready",
            "torch": torch.__version__,
            "atol": float(atol) if atol is not None else None,
            "rtol": float(rtol) if rtol is not None else None,
        }
    )
    # Started and imported without touching the GPU; it is used once the parent says "go".
    _await(ch, "go")
    device = setup_device(job["device"])
    ch.send({"kind": "device", "device": device_label(device)})
    models: list[torch.nn.Module] = []
    pool: list[list[Any]] = []
    with torch.no_grad():
        for index, trial in enumerate(job["trials"]):
            try:
                model = h.build_model(problem, problem.Model, trial["weight_seed"]).to(device)
                inputs = h.build_inputs(problem, trial["input_seed"], device)
                recorder = h.OpRecorder() if index == 0 else None
                with recorder or contextlib.nullcontext():
                    value = model(*inputs)
            except BaseException as exc:
                raise StageError("reference forward", exc) from exc
            if recorder is not None:
                ch.send({"kind": "ops", "aten_ops": sorted(recorder.ops)})
            send_outputs(
                ch,
                {
                    "kind": "trial",
                    "index": index,
                    "has_weights": len(model.state_dict()) > 0,
                    "input_bytes": input_bytes(inputs),
                    "controls_pass": _negative_controls(value, inputs, atol, rtol) if index == 0 else [],
                },
                value,
            )
            if index == 0:
                ch.send({"kind": "work", **_count_work(problem, model, trial["input_seed"], device)})
            models.append(model)
            pool.append(inputs)
        model = models[0]
        # torch.compile's compilation is CPU work: it happens here, before the GPU is ours alone.
        compiled, compile_error = _compile(model, pool[0]) if job.get("compile_baseline") else (None, None)
        # The parent takes the GPU for timing (no other evaluation runs on it meanwhile), then says "time".
        ch.send({"kind": "trials_done"})
        _await(ch, "time")
        timing = job["timing"]
        flush_buf = h.l2_flush_buffer(device)
        checked = set(timing["checked"])
        kept: dict[int, Any] = {}

        def keep_checked(i: int, value: Any) -> None:
            if i in checked:
                kept[i] = snapshot_outputs(value)  # a copy: sent later, after calls that may reuse its memory

        samples = _time_schedule(model, pool, timing, device, flush_buf, keep_checked)
        ch.send({"kind": "timing", **_timing_payload(samples, device)})
        if compiled is not None:
            ch.send({"kind": "compile_timing", **_time_compiled(compiled, pool, timing, device, flush_buf)})
        elif compile_error is not None:
            ch.send({"kind": "compile_timing", "ok": False, "error": compile_error})
        # The expected outputs of the checked calls travel when the parent asks, after the candidate's
        # timed calls: the GPU is free for the next evaluation while 100s of MiB go through the pipe.
        ch.send({"kind": "timed"})
        _await(ch, "checked")
        for i in sorted(kept):
            send_outputs(ch, {"kind": "checked", "sample": i}, kept.pop(i))
    ch.send({"kind": "done"})


def _await(ch: Channel, kind: str) -> None:
    got = ch.recv().header.get("kind")
    if got != kind:
        raise StageError(f"waiting for {kind!r}", RuntimeError(f"expected a {kind!r} message, got {got!r}"))


def _count_work(problem: Any, model: torch.nn.Module, input_seed: int, device: torch.device) -> dict[str, Any]:
    """FLOPs and minimal bytes of one reference forward, on fresh inputs (forward may mutate its own)."""
    from openkernel.profile import count_work

    try:
        fresh = h.build_inputs(problem, input_seed, device)
        return {"ok": True, **count_work(model, fresh).to_json()}
    except Exception as exc:  # counting is a view on the problem; it never fails the evaluation
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


def _negative_controls(value: Any, inputs: list[Any], atol: Any, rtol: Any) -> list[str]:
    """Trivial answers that pass this problem's check: all zeros, or the first input returned as is (trial 0).

    A problem where either passes cannot tell a real kernel from a lazy one; the parent flags it.
    """
    if not isinstance(value, torch.Tensor):
        return []
    expected = value.detach().cpu()
    tol = tolerance_for(expected.dtype, atol, rtol)
    passing = []
    if passes(expected, torch.zeros_like(expected), tol):
        passing.append("an all-zeros output")
    first = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
    same_kind = first is not None and first.shape == expected.shape and first.dtype == expected.dtype
    if same_kind and first is not None and passes(expected, first.detach().cpu(), tol):
        passing.append("returning the input unchanged")
    return passing


def _timing_payload(samples: list[h.SampleTiming], device: torch.device) -> dict[str, Any]:
    return {
        "method": "cuda_events" if device.type == "cuda" else "wall_clock",
        "event_ms": [s.event_ms for s in samples],
        "synced_ms": [s.synced_ms for s in samples] if device.type == "cuda" else None,
        "wall_ms": [s.wall_ms for s in samples],
        "late": [s.late for s in samples],
    }


def _compile(model: torch.nn.Module, inputs: list[Any]) -> tuple[Any, str | None]:
    """torch.compile of the reference, compiled by one call; (None, why) when it fails (a note, not a failure)."""
    try:
        compiled = torch.compile(model)
        compiled(*inputs)
        return compiled, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]


def _time_compiled(
    compiled: Any,
    pool: list[list[Any]],
    timing: dict[str, Any],
    device: torch.device,
    flush_buf: torch.Tensor | None,
) -> dict[str, Any]:
    try:
        return {"ok": True, **_timing_payload(_time_schedule(compiled, pool, timing, device, flush_buf), device)}
    except Exception as exc:  # torch.compile failing is a note, not a failed evaluation
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


def _time_schedule(
    fn: Any,
    pool: list[list[Any]],
    timing: dict[str, Any],
    device: torch.device,
    flush_buf: torch.Tensor | None,
    each: Callable[[int, Any], None] | None = None,
) -> list[h.SampleTiming]:
    """Time ``fn`` over the parent's schedule (each call on fresh values of a trial's inputs, after an L2
    flush); the calls after the warm-up, and ``each(index, output)`` for every call."""
    samples = []
    for i, (pool_index, noise_seed) in enumerate(timing["schedule"]):
        inputs = h.materialize(pool[pool_index], noise_seed, device)
        value, t = h.time_call(functools.partial(fn, *inputs), device, functools.partial(h.flush, flush_buf))
        if i >= timing["warmup"]:
            samples.append(t)
        if each is not None:
            each(i, value)
        del value, inputs
    return samples
