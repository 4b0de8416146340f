"""Every GPU benchmark in one process tree that finishes within 10 minutes on one H200.

    PYTHONPATH=src python3 bench/gpu_all.py --out DIR [--deadline-s 530] [--only fidelity,ncu,...]

Sections, in order (each skipped, and said so, when the deadline is too near):

* ``calibrate``: the GPU's copy bandwidth and matmul rates, the ceilings every roofline figure uses.
* ``fidelity``: a memory-bound, a compute-bound and a tiny launch-bound kernel, each evaluated in 5
  separate evaluations (fresh processes): median-to-median spread. Goal: <= 1%.
* ``ncu``: the same kernels' ``gpu__time_duration`` under Nsight Compute against our median. Goal: 5%.
* ``do_bench``: our baseline (torch eager, timed by the reference worker) against
  ``triton.testing.do_bench`` on the same op, same inputs. Goal: 5%.
* ``throughput``: distinct tiny Triton and CUDA candidates fully evaluated (compile, 5 correctness
  trials, 50 timed calls) per GPU-minute, cold caches then warm, evaluations in parallel (trials share
  the GPU, timing takes it in turns). Goal: >= 30 Triton candidates per minute.
* ``zoo``: the GPU attacks (side stream, allocator reuse, background thread, ...), each caught.
* ``results`` (last: it gets the time left): an offline-generator session per bundled problem
  (``--iterations``, default 1: on the H200 the first kernel was the best in 7 of 8 two-iteration
  sessions), all at once on the one GPU unless ``--sessions N`` (timing takes turns; every timed call
  is checked to have been queued before the GPU reached it, so a busy CPU does not leak into the
  times). Each evaluation also times torch.compile: eager, torch.compile, ours, % of the roofline
  floor; fast_p at p = 0, 1, 1.5, 2 and the geometric mean, KernelBench's way.
* ``solutions`` (only with ``--only``): every bundled problem's honest Triton solution, several at once.

Last, a table of the side-stream figures of every honest evaluation (what the side-stream gate must let
through); the zoo also runs the open holes (tests/kernels/open_holes/), reported apart.

Writes OUT/gpu_all.json (everything, machine-readable), OUT/tables.md (the tables for BENCHMARKS.md),
OUT/evals.jsonl (every evaluation) and OUT/sessions.tgz (the results' session directories).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_results as r  # noqa: E402
import gpu_sections as s  # noqa: E402
import torch  # noqa: E402

SECTIONS = ("calibrate", "fidelity", "ncu", "do_bench", "throughput", "zoo", "results", "solutions")
# The default run (it fits 10 minutes); ``solutions`` (every bundled problem's honest kernel, ~15 s each,
# the evaluator's own check) runs when asked for with --only.
DEFAULT = SECTIONS[:-1]
# Seconds a section needs at least; one that would not fit before the deadline is skipped and said so.
NEEDS_S = {"calibrate": 20, "fidelity": 90, "ncu": 60, "do_bench": 15, "throughput": 120, "results": 150, "zoo": 45}
NEEDS_S["solutions"] = 30


def environment() -> dict[str, Any]:
    import triton

    def tool(cmd: list[str]) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout
        except OSError:
            return "not found"
        return out.strip().splitlines()[-1] if out.strip() else "?"

    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "gpu": torch.cuda.get_device_name(0),
        "driver": tool(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "ncu": tool(["ncu", "--version"]),
        "cpus": _cpus(),
        "commit": _commit(tool),
    }


def _commit(tool: Any) -> str:
    """This checkout's commit; not a parent folder's (a copy of the tree inside another repository)."""
    top = tool(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"])
    if Path(top).resolve() != ROOT.resolve():
        return "unknown (not a git checkout)"
    return str(tool(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=530.0, help="start no section or session after this")
    parser.add_argument("--only", default=",".join(DEFAULT), help="comma-separated sections")
    parser.add_argument(
        "--iterations", type=int, default=1, help="offline-generator iterations per results session (default 1)"
    )
    parser.add_argument("--sessions", type=int, default=0, help="results sessions at once (default: all)")
    parser.add_argument("--workers", type=int, default=0, help="evaluations at once (default: CPU cores / 2)")
    args = parser.parse_args()
    wanted = [part for part in args.only.split(",") if part]
    unknown = sorted(set(wanted) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}: choose from {', '.join(SECTIONS)}")
    if not torch.cuda.is_available():
        print("bench/gpu_all.py needs a CUDA GPU; the CPU benchmarks are bench/tui_10k.py, dashboard_10k.py, ...")
        return 2
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kc-bench-"))
    env = environment()
    print(json.dumps(env), flush=True)
    ctx = s.BenchContext(
        out=args.out,
        work=work,
        workers=args.workers or max(2, env["cpus"] // 2),
        log=(args.out / "evals.jsonl"),
        iterations=args.iterations,
        sessions=args.sessions,
    )
    report: dict[str, Any] = {"environment": env, "sections": {}}
    tables = [f"Run: {env['date']} · {env['gpu']} · driver {env['driver']} · CUDA {env['cuda']} · torch "
              f"{env['torch']} · triton {env['triton']} · Python {env['python']} · {env['ncu']} · "
              f"{env['cpus']} CPU cores · commit {env['commit']}\n"]  # fmt: skip

    def run(name: str) -> None:
        left = args.deadline_s - (time.monotonic() - started)
        if left < NEEDS_S[name]:
            report["sections"][name] = {"skipped": f"{left:.0f} s left before the deadline, {NEEDS_S[name]} s needed"}
            tables.append(f"### {name}\n\nNOT RUN: {report['sections'][name]['skipped']}.\n")
            return
        t0 = time.monotonic()
        print(f"=== {name} ({left:.0f} s left)", flush=True)
        try:
            data, table = getattr(s if hasattr(s, name) else r, name)(ctx, left)
        except Exception as exc:  # one broken section must not lose the others' results
            why = f"{type(exc).__name__}: {exc}"
            data, table = {"error": why}, f"### {name}\n\nFAILED: {why}\n"
        data["seconds"] = round(time.monotonic() - t0, 1)
        report["sections"][name] = data
        tables.append(table)
        print(table, flush=True)
        (args.out / "gpu_all.json").write_text(json.dumps(report, indent=1, default=str))
        (args.out / "tables.md").write_text("\n".join(tables))

    for name in SECTIONS:
        if name in wanted:
            run(name)
    report["side_figures"], side_table = s.side_figures(ctx.log)
    tables.append(side_table)
    report["total_seconds"] = round(time.monotonic() - started, 1)
    tables.append(f"Whole run: {report['total_seconds']:.0f} s.\n")
    (args.out / "gpu_all.json").write_text(json.dumps(report, indent=1, default=str))
    (args.out / "tables.md").write_text("\n".join(tables))
    sessions = work / "sessions"
    if sessions.is_dir():
        with tarfile.open(args.out / "sessions.tgz", "w:gz") as tar:
            tar.add(sessions, arcname="sessions")
    print(f"total {report['total_seconds']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
