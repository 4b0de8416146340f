"""Summarise recorded sessions as a benchmark table: eager, torch.compile, our best, and % of the roofline floor.

For each session directory given: the best kept iteration's numbers come from the recorded events
(the evaluation that kept it). When that evaluation did not time torch.compile, ``best.py`` is evaluated
once more with the torch.compile baseline (torch.compile of the reference, timed the same way), so all
three times come from one machine and one evaluation. Writes OUT/sessions.jsonl and prints a Markdown table.

    PYTHONPATH=src python3 bench/session_table.py --out DIR SESSION_DIR [SESSION_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from openkernel import EvalConfig, evaluate_candidate, load_problem  # noqa: E402
from openkernel.events import Decision, EvaluationFinished, SessionStarted  # noqa: E402
from openkernel.store import DirectoryStore  # noqa: E402


def summarise(session: Path, timeout_s: float) -> dict[str, Any]:
    store = DirectoryStore.open(session)
    events = store.read_events().events
    started = next(e for e in events if isinstance(e, SessionStarted))
    results = {e.iteration: e.result_json for e in events if isinstance(e, EvaluationFinished)}
    decisions = [e for e in events if isinstance(e, Decision)]
    kept = [d.iteration for d in decisions if d.decision == "keep"]
    iterations = sorted({d.iteration for d in decisions})
    row: dict[str, Any] = {
        "problem": started.problem_name,
        "session": str(session),
        "iterations": len(decisions),
        "kept": len(kept),
        "errors": sum(d.decision == "error" for d in decisions),
        "statuses": [str(results[i].get("status", "?")) if i in results else "no kernel" for i in iterations],
    }
    if not kept:  # why nothing was kept, in the session's own words ("no kernel: no offline template for ...")
        return row | {"best_iteration": None, "reasons": list(dict.fromkeys(d.reason for d in decisions if d.reason))}
    best = kept[-1]
    recorded = results[best]
    row |= {
        "best_iteration": best,
        "recorded_ms": recorded.get("runtime_ms"),
        "recorded_eager_ms": recorded.get("reference_runtime_ms"),
    }
    t0 = time.monotonic()
    if recorded.get("compile_baseline_runtime_ms") is not None:
        final = recorded  # the session's own evaluations timed torch.compile too: one evaluation has all three
    else:
        problem = load_problem(started.problem_path if Path(started.problem_path).is_file() else started.problem_name)
        config = EvalConfig(compile_baseline=True, timeout_s=timeout_s)
        final = evaluate_candidate(problem, session / "best.py", config).to_json()
    profile = final.get("profile") or {}
    sol = profile.get("sol_time_ms")
    ours = final.get("runtime_ms")
    return row | {
        "status": final.get("status"),
        "eager_ms": final.get("reference_runtime_ms"),
        "compile_ms": final.get("compile_baseline_runtime_ms"),
        "ours_ms": ours,
        "vs_eager": _ratio(final.get("reference_runtime_ms"), ours),
        "vs_compile": _ratio(final.get("compile_baseline_runtime_ms"), ours),
        "sol_ms": sol,
        "pct_of_floor": 100.0 * sol / ours if sol and ours else None,
        "bottleneck": profile.get("bottleneck"),
        "bandwidth_source": profile.get("bandwidth_source"),
        # Timed calls the GPU reached before they were queued (host time inside them): ours, eager's.
        "late_calls": [(final.get(key) or {}).get("late_samples") for key in ("candidate_timing", "reference_timing")],
        "eval_s": round(time.monotonic() - t0, 1),
        "reasons": list(final.get("reasons") or [])[:2],
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _f(value: Any, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("sessions", nargs="+", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (args.out / "sessions.jsonl").open("a") as log:
        for session in args.sessions:
            try:
                row = summarise(session, args.timeout)
            except Exception as exc:  # one broken session must not lose the others' rows
                row = {"session": str(session), "error": f"{type(exc).__name__}: {exc}"}
            log.write(json.dumps(row) + "\n")
            log.flush()
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| problem | eager ms | torch.compile ms | ours ms | vs eager | vs compile | % of floor | kept/iters |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for r in rows:
        if r.get("vs_compile"):
            ratios.append(r["vs_compile"])
        print(
            f"| {r.get('problem', r['session'])} | {_f(r.get('eager_ms'))} | {_f(r.get('compile_ms'))} | "
            f"{_f(r.get('ours_ms'))} | {_f(r.get('vs_eager'), 2)}x | {_f(r.get('vs_compile'), 2)}x | "
            f"{_f(r.get('pct_of_floor'), 1)}% | {r.get('kept', 0)}/{r.get('iterations', 0)} |"
        )
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeometric mean vs torch.compile over {len(ratios)} problems: {geo:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
