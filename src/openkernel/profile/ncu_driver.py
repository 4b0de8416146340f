"""What ncu runs: ``python -m openkernel.profile.ncu_driver --problem P --candidate C ...``.

It imports the problem and the candidate as the evaluator's candidate worker does (harness first,
then the problem at the chosen sizes, then the candidate, with ``load_inline`` builds cached where
the evaluator caches them), builds ``ModelNew`` with the reference's weights, makes inputs with the
problem's ``get_inputs()``, warms up, and then runs the forward ``--calls`` times between
``cudaProfilerStart`` and ``cudaProfilerStop``. ncu runs with ``--profile-from-start off``, so it
profiles only those launches: no import, build, input or warm-up kernel is in the profile.

Nothing is judged here; the exit code says whether the calls ran (0), or the driver's error (3),
with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# harness before any candidate code, as in the evaluator's worker.
from openkernel.evaluate import harness as h

__all__ = ["main"]

_SEED = 0  # weights and inputs: a profile needs realistic values, not secret ones
_FAILED = 3


class _DriverError(Exception):
    pass


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="openkernel.profile.ncu_driver")
    parser.add_argument("--problem", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--sizes", default="[]", help='JSON list of [NAME, NUMBER] pairs, e.g. [["dim", 1024]]')
    parser.add_argument("--warmup", type=int, default=2, help="forward calls before the profiled ones")
    parser.add_argument("--calls", type=int, default=1, help="forward calls between the profiler markers")
    parser.add_argument("--cache-dir", type=Path, required=True, help="where load_inline builds are cached")
    parser.add_argument("--build-timeout", type=float, default=240.0)
    parser.add_argument("--device", default="cuda", help="cuda (profiled) or cpu (a dry run, for tests)")
    return parser.parse_args(argv)


def _stage(name: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:
        raise _DriverError(f"{name}: {type(exc).__name__}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise _DriverError("no CUDA GPU in the profiled process")
    # The problem's precision, as in the evaluator: no silent TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sizes = [(str(name), value) for name, value in json.loads(args.sizes)]
    problem = _stage("problem import", h.import_file, args.problem, "openkernel_problem")
    h.apply_sizes(problem, sizes, only_existing=False)
    candidate = _stage("candidate import", _import_candidate, args, device)
    model_cls = getattr(candidate, "ModelNew", None)
    if not isinstance(model_cls, type):
        raise _DriverError("the candidate defines no class ModelNew (it must define class ModelNew(nn.Module))")
    h.apply_sizes(candidate, sizes, only_existing=True)
    with torch.no_grad():
        model = _stage("init", _model, problem, model_cls, device)
        inputs = _stage("inputs", h.build_inputs, problem, _SEED, device)
        for _ in range(args.warmup):
            _stage("warm-up forward", model, *inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
        try:
            for _ in range(args.calls):
                _stage("profiled forward", model, *inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
        finally:
            if device.type == "cuda":
                torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
    print(f"openkernel.profile.ncu_driver: ran {args.calls} profiled call(s) after {args.warmup} warm-up", flush=True)
    return 0


def _import_candidate(args: argparse.Namespace, device: Any) -> Any:
    from openkernel.evaluate.cuda_build import Mode, intercept_load_inline

    mode: Mode = "build" if device.type == "cuda" else "compile_only"
    with intercept_load_inline(args.cache_dir / "cuda_build", mode, args.build_timeout):
        return h.import_file(args.candidate, "openkernel_candidate")


def _model(problem: Any, model_cls: Any, device: Any) -> Any:
    reference = h.build_model(problem, problem.Model, _SEED)
    model = h.build_model(problem, model_cls, _SEED)
    h.share_weights(reference, model)
    return model.to(device)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:
        return run(args)
    except _DriverError as err:
        print(f"openkernel.profile.ncu_driver: error: {err}", file=sys.stderr, flush=True)
        return _FAILED


if __name__ == "__main__":
    sys.exit(main())
