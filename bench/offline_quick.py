"""Quick GPU look at the offline generator's launch configurations at full size, beside torch.compile.

Outside the evaluator (no isolation, one process): for each covered bundled problem, the default
configuration, the listed alternatives and the ``--sweep`` configurations nearest the default are
emitted, checked once against the reference (tolerance by dtype, or the problem's own ATOL/RTOL) and
timed the way the evaluator's harness times (L2 flushed, a ~1 ms device lead, CUDA events, the median
of ``--calls`` calls). Eager PyTorch and torch.compile are timed the same way, and inductor's
generated code is saved, so a config that loses to torch.compile can be read against what it wrote.
Memory-bound rows report the bandwidth of their minimal traffic (inputs, parameters and output, each
once). The evaluator's numbers (``kernel-code optimize``) are the ones to report; this is the fast
look that fits one device call.

    PYTHONPATH=src python3 bench/offline_quick.py [--problems softmax_fp32,...] [--sweep 12] [--out DIR]
                                                  [--budget-s 480] [--device cpu (the interpreter, small sizes)]

It ends with a summary per problem: the default config, the fastest, and each against torch.compile.
With ``--out``: ``offline_quick.jsonl`` (one line per timing) and ``inductor_<problem>.log``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from openkernel.evaluate import harness  # noqa: E402
from openkernel.generate.offline import recognise_source  # noqa: E402
from openkernel.generate.offline.configs import Config, default_config, family_of, resolve, space  # noqa: E402
from openkernel.generate.offline.emit import emit_candidate  # noqa: E402
from openkernel.problems.loader import bundled_dir, load_problem  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}
# Family -> alternative tags tried after the default: what exploration reaches first, and torch.compile's
# choices for long rows (a looped reduction over 2048-wide chunks, 16 warps, cache hints).
ALTERNATIVES = {
    "row": [
        "variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no evict=hints",
        "variant=one_pass BLOCK=auto warps=16 ROWS=1 persistent=no evict=none",
        "variant=one_pass BLOCK=auto warps=16 ROWS=1 persistent=no evict=hints",
        "variant=looped BLOCK=2048 warps=16 ROWS=1 persistent=no evict=hints",
        "variant=looped BLOCK=2048 warps=16 ROWS=1 persistent=no evict=none",
    ],
    "pointwise": ["BLOCK=4096 warps=8 evict=hints", "BLOCK=1024 warps=4 evict=none", "BLOCK=1024 warps=4 evict=hints"],
    "tiled": ["BLOCK=2048 ROWS=1 warps=8 evict=hints", "BLOCK=1024 ROWS=2 warps=8 evict=hints"],
    "matmul": ["BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 warps=8 stages=4 GROUP_M=8"],
    "strided": [],
}
WARMUP = 5


def timer(device: torch.device, calls: int) -> Callable[[Callable[[], Any]], float]:
    """Median ms of ``calls`` timed calls after a warm-up: the harness's flush, device lead and events on a GPU."""
    buffer = harness.l2_flush_buffer(device)

    def run(fn: Callable[[], Any]) -> float:
        times = []
        for i in range(WARMUP + calls):
            _, sample = harness.time_call(fn, device, lambda: harness.flush(buffer))
            if i >= WARMUP:
                times.append(sample.event_ms)
        return statistics.median(times)

    return run


def candidates(plan: Any, family: str, sweep: int) -> list[Config]:
    """The default, the family's alternatives, then the ``sweep`` valid configs nearest the default."""
    first = default_config(plan)
    listed = [first] + [c for t in ALTERNATIVES[family] if (c := Config.parse(family, t)) is not None]
    valid = space(plan)
    wanted = [c for c in listed if c == first or c in valid]
    seen = {resolve(plan, c) for c in wanted}
    base = resolve(plan, first)

    def distance(c: Config) -> int:
        return sum(abs(resolve(plan, c).index(axis) - base.index(axis)) for axis, _ in c.knobs)

    for c in sorted(valid, key=lambda c: (distance(c), c.tag())):
        if sweep <= 0:
            break
        if resolve(plan, c) not in seen:
            seen.add(resolve(plan, c))
            wanted.append(c)
            sweep -= 1
    return wanted


def compiled_time(model: torch.nn.Module, inputs: list[Any], time_it: Callable[..., float], log: Path | None) -> float:
    """torch.compile's time for the same call; its generated code goes to ``log`` when given."""
    handler = logging.FileHandler(log) if log is not None else None
    if handler is not None:
        logging.getLogger("torch._inductor").addHandler(handler)
        torch._logging.set_logs(output_code=True)
    try:
        compiled = torch.compile(model)
        compiled(*inputs)
        return time_it(lambda: compiled(*inputs))
    finally:
        if handler is not None:
            torch._logging.set_logs(output_code=False)
            logging.getLogger("torch._inductor").removeHandler(handler)


def run_problem(
    name: str, device: torch.device, args: argparse.Namespace, tmp: Path, record: Callable[..., None]
) -> None:
    """Table rows for ``name``: eager, torch.compile, then one per configuration (or why none)."""
    problem = load_problem(name)
    source = problem.path.read_text()
    found = recognise_source(source)
    if found.plan is None or found.trace is None:
        print(f"{name:24} {found.reason}")
        return
    plan, family = found.plan, family_of(found.plan)
    module = harness.import_file(problem.path, f"ref_{name}")
    if device.type == "cpu":
        harness.apply_sizes(module, problem.small_sizes, True)
    model = harness.build_model(module, module.Model, 1).to(device)
    inputs = harness.build_inputs(module, 7, device)
    time_it = timer(device, args.calls)
    with torch.no_grad():
        expected = model(*inputs)
        eager_ms = time_it(lambda: model(*inputs))
        moved = sum(t.numel() * t.element_size() for t in [*inputs, expected, *model.state_dict().values()])
        record(name, "eager", eager_ms, eager_ms, moved)
        if device.type == "cuda" and not args.no_compile:
            log = args.out / f"inductor_{name}.log" if args.out else None
            try:
                record(name, "torch.compile", compiled_time(model, inputs, time_it, log), eager_ms, moved)
            except Exception as err:  # a failing compile is a row of the table
                print(f"{name:24} {'torch.compile':72} {type(err).__name__}: {str(err).splitlines()[0][:80]}")
        atol = getattr(module, "ATOL", TOLERANCE.get(expected.dtype, 0.0))
        rtol = getattr(module, "RTOL", TOLERANCE.get(expected.dtype, 0.0))
        for i, config in enumerate(candidates(plan, family, args.sweep)):
            if time.monotonic() > args.deadline:
                print(f"{name:24} the --budget-s deadline passed: the other configs were not timed")
                return
            path = tmp / f"{name}_{i}.py"
            label = config.tag()
            try:
                path.write_text(emit_candidate(plan, config, found.trace, source, ()))
                new = harness.build_model(module, harness.import_file(path, f"cand_{name}_{i}").ModelNew, 1).to(device)
                harness.share_weights(model, new)
                got = new(*inputs)
                if not torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol):
                    worst = (got.double() - expected.double()).abs().max().item()
                    print(f"{name:24} {label:72} BAD: max error {worst:.2g}")
                    continue
                record(name, label, time_it(lambda new=new: new(*inputs)), eager_ms, moved)
            except Exception as err:  # a failing config is a row of the table
                print(f"{name:24} {label:72} {type(err).__name__}: {str(err).splitlines()[0][:80]}")
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="", help="comma-separated bundled problems (default: all)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sweep", type=int, default=0, help="also time this many configs nearest the default")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per kernel (median)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop starting configs after this long")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", type=Path, default=None, help="folder for offline_quick.jsonl and inductor logs")
    args = parser.parse_args()
    args.deadline = time.monotonic() + args.budget_s
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        # Triton reads it when it is first imported: start again with the interpreter on.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "TRITON_INTERPRET": "1"})
    names = args.problems.split(",") if args.problems else sorted(p.stem for p in bundled_dir().glob("[a-z]*.py"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    lines = (args.out / "offline_quick.jsonl").open("a") if args.out else None

    timed: dict[str, dict[str, float]] = {}  # problem -> what -> ms

    def record(problem: str, what: str, ms: float, eager_ms: float, moved: int) -> None:
        timed.setdefault(problem, {})[what] = ms
        gbps = moved / ms / 1e6
        print(f"{problem:24} {what:72} {ms:9.4f} {eager_ms / ms:8.2f} {gbps:7.0f}", flush=True)
        if lines is not None:
            row = {"problem": problem, "what": what, "ms": ms, "eager_ms": eager_ms, "gb_per_s": gbps}
            lines.write(json.dumps(row | {"device": str(device), "calls": args.calls}) + "\n")
            lines.flush()

    print(f"{'problem':24} {'what (config)':72} {'ms':>9} {'x eager':>8} {'GB/s':>7}")
    tmp = Path(tempfile.mkdtemp(prefix="offline-quick-"))
    for name in names:
        if time.monotonic() > args.deadline:
            print(f"{name:24} not started: the --budget-s deadline passed")
            continue
        run_problem(name, device, args, tmp, record)
    summarise(timed)


def summarise(timed: dict[str, dict[str, float]]) -> None:
    """Per problem: the default config, the fastest one, and each against torch.compile when it was timed."""
    print(f"\n{'problem':24} {'default ms':>10} {'best ms':>9} {'compile ms':>10} {'default vs compile':>18} "
          f"{'best vs compile':>15}  best config (speedup: compile ms / ours)")  # fmt: skip
    for problem, rows in timed.items():
        ours = {what: ms for what, ms in rows.items() if what not in ("eager", "torch.compile")}
        if not ours:
            continue
        default = next(iter(ours.values()))  # the default is timed first
        best = min(ours, key=ours.__getitem__)
        compiled = rows.get("torch.compile")
        vs = [f"{compiled / ms:.3f}x" if compiled else "—" for ms in (default, ours[best])]
        print(f"{problem:24} {default:10.4f} {ours[best]:9.4f} {compiled or float('nan'):10.4f} "
              f"{vs[0]:>18} {vs[1]:>15}  {best}")  # fmt: skip


if __name__ == "__main__":
    main()
