"""GPU checks of the evaluator, in one process tree that fits one device call.

Runs, in this order, until the deadline: the GPU attack zoo (side stream, allocator reuse,
background thread, and the other attacks at full size), the same honest kernel timed in five
separate evaluations (median-to-median spread), and every bundled problem's honest solution.
Writes one JSON line per evaluation to OUT/evaluator.jsonl and prints a table last.

    PYTHONPATH=src python3 bench/gpu_evaluator.py --out DIR [--deadline-s 540] [--only zoo,fidelity,solutions]
        [--problems matmul_fp32,row_sum_fp32] [--zoo side_stream,patch_clock]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpu_sections import ZOO as ZOO_ON_GPU  # noqa: E402  (the same list as bench/gpu_all.py's zoo)

from openkernel import EvalConfig, bundled_names, evaluate_candidate, load_problem  # noqa: E402


def _header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("# ") and ":" in line:
            key, _, value = line[2:].partition(":")
            if key in ("problem", "expect", "reason", "needs"):
                out[key] = value.strip()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=540)
    parser.add_argument("--only", default="zoo,fidelity,solutions")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--problems", default="", help="comma-separated bundled problems (default: all)")
    parser.add_argument("--zoo", default="", help="comma-separated attack files to run (default: all GPU ones)")
    args = parser.parse_args()
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "evaluator.jsonl").open("a")
    env = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "driver": _driver(),
    }
    print(json.dumps(env), flush=True)
    log.write(json.dumps({"kind": "env", **env}) + "\n")
    rows: list[tuple[str, ...]] = []
    parts = args.only.split(",")

    def left() -> float:
        return args.deadline_s - (time.monotonic() - started)

    def run(kind: str, problem: str, candidate: Path, **config: object) -> dict[str, object]:
        t0 = time.monotonic()
        result = evaluate_candidate(load_problem(problem), candidate, EvalConfig(**config))  # type: ignore[arg-type]
        record = {
            "kind": kind,
            "problem": problem,
            "candidate": candidate.name,
            "elapsed_s": time.monotonic() - t0,
            **result.to_json(),
        }
        record.pop("log_tail", None)
        log.write(json.dumps(record) + "\n")
        log.flush()
        return record

    if "zoo" in parts:
        for name in [z for z in args.zoo.split(",") if z] or ZOO_ON_GPU:
            if left() < 60:
                break
            path = ROOT / "tests" / "kernels" / f"{name}.py"
            head = _header(path)
            rec = run("zoo", head["problem"], path, timeout_s=120)
            ok = rec["status"] in head["expect"].split("|")
            rows.append(
                (
                    "zoo",
                    name,
                    str(rec["status"]),
                    "ok" if ok else f"EXPECTED {head['expect']}",
                    str(rec["reasons"][0])[:90] if rec["reasons"] else "",
                )
            )
            print(rows[-1], flush=True)
    if "fidelity" in parts:
        medians = []
        for _ in range(args.runs):
            if left() < 40:
                break
            rec = run("fidelity", "softmax_fp32", ROOT / "tests" / "solutions" / "softmax_fp32.py")
            timing = rec["candidate_timing"]
            if isinstance(timing, dict):
                medians.append(float(timing["median_ms"]))
        if medians:
            spread = 100 * (max(medians) - min(medians)) / statistics.median(medians)
            rows.append(
                (
                    "fidelity",
                    f"softmax_fp32 x{len(medians)}",
                    " ".join(f"{m:.4f}" for m in medians),
                    f"spread {spread:.2f}%",
                    "",
                )
            )
            print(rows[-1], flush=True)
    if "solutions" in parts:
        wanted = [p for p in args.problems.split(",") if p] or bundled_names()
        for name in wanted:
            if left() < 45:
                rows.append(("solution", name, "NOT RUN", "deadline", ""))
                continue
            rec = run("solution", name, ROOT / "tests" / "solutions" / f"{name}.py", compile_baseline=False)
            rows.append(
                (
                    "solution",
                    name,
                    str(rec["status"]),
                    f"{rec['runtime_ms'] or 0:.4f} ms vs {rec['reference_runtime_ms'] or 0:.4f} ms",
                    f"{rec['speedup'] or 0:.2f}x in {rec['elapsed_s']:.0f}s",
                )
            )
            print(rows[-1], flush=True)
    print("\n=== summary ===")
    for row in rows:
        print(" | ".join(row))
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


def _driver() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        return out.stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
