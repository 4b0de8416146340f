"""bench/gpu_all.py's results and zoo sections: the offline generator on every bundled problem, and the attacks."""

from __future__ import annotations

import math
import os
import time
from typing import Any

from gpu_sections import KERNELS, OPEN_HOLES, SOLUTIONS, ZOO, BenchContext, kernel_header, pool_map
from session_table import summarise

from openkernel import EvalConfig, bundled_names, load_problem, optimize
from openkernel.critic import RuleCritic
from openkernel.evaluate import ProcessEvaluator
from openkernel.events import SessionConfig
from openkernel.generate.offline import OfflineGenerator
from openkernel.store import DirectoryStore
from openkernel.sweeps.summary import FAST_P, fast_p_of, geometric_mean


def _session(ctx: BenchContext, name: str, deadline: float) -> dict[str, Any]:
    left = deadline - time.monotonic()
    if left < 120:  # one iteration (with torch.compile's compile) must fit before the deadline
        return {"problem": name, "error": f"not run: {left:.0f} s left before the run's deadline"}
    problem = load_problem(name)
    budget = left - 50  # leave time for the summary (it evaluates again only if torch.compile was not timed)
    config = SessionConfig("triton", "offline", "full", ctx.iterations, budget, None, None)
    store = DirectoryStore.create_at(ctx.work / "sessions" / name, problem.name, config)
    # Every evaluation times torch.compile too (its compile is cached after the first), so the best one
    # already holds eager, torch.compile and ours: no evaluation again at the end.
    evaluator = ProcessEvaluator(EvalConfig(timeout_s=150, cache_dir=ctx.cache, compile_baseline=True))
    t0 = time.monotonic()
    for _ in optimize(problem, OfflineGenerator(), evaluator, store, config, RuleCritic()):
        pass
    row = summarise(store.path, timeout_s=min(150.0, max(30.0, deadline - time.monotonic())))
    row["session_s"] = round(time.monotonic() - t0, 1)
    return row


def results(ctx: BenchContext, left: float) -> tuple[dict[str, Any], str]:
    names = bundled_names()
    # The last section of a run: whatever time is left.
    deadline = time.monotonic() + left - 15
    # Every session at once by default: timing takes the GPU in turns anyway, and a session left waiting for
    # a free slot may find too little time left to start (in the 17:10 UTC run, 8 at a time left 5 unstarted).
    at_once = ctx.sessions or len(names)
    # Each reference worker's torch.compile starts a pool of compile processes, one per core by default:
    # with every session at once that is sessions x cores processes importing torch. Share the cores.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 1) // at_once)))
    rows = pool_map(at_once, lambda n: _safe_session(ctx, n, deadline), names)
    vs_eager = [r.get("vs_eager") if r.get("status") == "correct" else None for r in rows]
    vs_compile = [r.get("vs_compile") if r.get("status") == "correct" else None for r in rows]
    data: dict[str, Any] = {"iterations": ctx.iterations, "sessions_at_once": at_once, "problems": rows}
    # KernelBench's measures, as the sweeps compute them: failed problems count in fast_p, not in the mean.
    data["fast_p_vs_eager"] = {str(p): fast_p_of(vs_eager, p) for p in FAST_P}
    data["fast_p_vs_compile"] = {str(p): fast_p_of(vs_compile, p) for p in FAST_P}
    data["geomean_vs_eager"] = geometric_mean(vs_eager) or math.nan
    data["geomean_vs_compile"] = geometric_mean(vs_compile) or math.nan
    lines = [
        f"### The offline generator on every bundled problem ({ctx.iterations} iteration(s), "
        f"{at_once} sessions at a time)",
        "",
        "| problem | eager | torch.compile | ours | vs eager | vs torch.compile | % of roofline floor | bottleneck "
        "| late calls (ours, eager) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("status") != "correct":
            why = r.get("error") or "; ".join(r.get("reasons") or []) or ", ".join(r.get("statuses") or [])
            lines.append(f"| {r['problem']} | | | no correct kernel: {str(why)[:170]} | | | | | |")
            continue
        lose = " **(loses)**" if (r.get("vs_compile") or 0) < 1 else ""
        lines.append(
            f"| {r['problem']} | {r['eager_ms']:.4f} ms | {_ms(r.get('compile_ms'))} | {r['ours_ms']:.4f} ms | "
            f"{r['vs_eager']:.2f}x | {_x(r.get('vs_compile'))}{lose} | {_f(r.get('pct_of_floor'))}% | "
            f"{r.get('bottleneck') or ''} | {', '.join(str(n) for n in r.get('late_calls') or [])} |"
        )
    fe, fc = data["fast_p_vs_eager"], data["fast_p_vs_compile"]
    lines += [
        "",
        f"Over all {len(rows)} bundled problems (a problem without a correct kernel counts as not fast):",
        "",
        "| against | fast_0 | fast_1 | fast_1.5 | fast_2 | geometric mean (correct ones) |",
        "|---|---|---|---|---|---|",
        f"| eager | {fe['0.0']:.2f} | {fe['1.0']:.2f} | {fe['1.5']:.2f} | {fe['2.0']:.2f} | "
        f"{data['geomean_vs_eager']:.2f}x |",
        f"| torch.compile | {fc['0.0']:.2f} | {fc['1.0']:.2f} | {fc['1.5']:.2f} | {fc['2.0']:.2f} | "
        f"{data['geomean_vs_compile']:.2f}x |",
    ]
    return data, "\n".join(lines) + "\n"


def _safe_session(ctx: BenchContext, name: str, deadline: float) -> dict[str, Any]:
    try:
        return _session(ctx, name, deadline)
    except Exception as exc:  # one problem's failure is a row, not the end of the section
        return {"problem": name, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _ms(v: float | None) -> str:
    return f"{v:.4f} ms" if v is not None else "n/a"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "n/a"


def _f(v: float | None) -> str:
    return f"{v:.1f}" if v is not None else "n/a"


# ----------------------------------------------------------------------------------------------- zoo


def zoo(ctx: BenchContext, left: float) -> tuple[dict[str, Any], str]:
    def one(name: str) -> dict[str, Any]:
        head = kernel_header(KERNELS / f"{name}.py")
        res = ctx.evaluate("zoo", head["problem"], KERNELS / f"{name}.py", timeout_s=120, cache_dir=ctx.cache)
        expected = head["expect"].split("|")
        return {
            "attack": name,
            "expect": expected,
            "status": res.status.value,
            "caught": res.status.value in expected,
            "reason": res.reasons[0] if res.reasons else "",
        }

    rows = pool_map(ctx.workers, one, ZOO + OPEN_HOLES)
    known, holes = rows[: len(ZOO)], rows[len(ZOO) :]
    lines = ["### The GPU attack zoo", "", "| kernel | expected | verdict | as expected | reason |"]
    lines.append("|---|---|---|---|---|")
    for r in known:
        ok = "yes" if r["caught"] else "**NO**"
        lines.append(f"| {r['attack']} | {' or '.join(r['expect'])} | {r['status']} | {ok} | {r['reason'][:110]} |")
    # Attacks not defended yet (tests/kernels/open_holes/): their verdicts, apart from the zoo's own count.
    for r in holes:
        ok = "caught" if r["caught"] else "**not caught (open hole)**"
        lines.append(f"| {r['attack']} | {' or '.join(r['expect'])} | {r['status']} | {ok} | {r['reason'][:110]} |")
    data = {"attacks": known, "all_as_expected": all(r["caught"] for r in known), "open_holes": holes}
    return data, "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ solutions


def solutions(ctx: BenchContext, left: float) -> tuple[dict[str, Any], str]:
    """Every bundled problem's honest Triton solution through the evaluator, several at once (timing takes the
    GPU in turns, as in the fidelity section)."""
    deadline = time.monotonic() + left - 20

    def one(name: str) -> dict[str, Any]:
        if time.monotonic() > deadline:
            return {"problem": name, "status": "not run (deadline)"}
        t0 = time.monotonic()
        res = ctx.evaluate("solution", name, SOLUTIONS / f"{name}.py", cache_dir=ctx.cache)
        return {
            "problem": name,
            "status": res.status.value,
            "reason": res.reasons[0] if res.reasons else "",
            "runtime_ms": res.runtime_ms,
            "reference_runtime_ms": res.reference_runtime_ms,
            "speedup": res.speedup,
            "seconds": time.monotonic() - t0,
        }

    rows = pool_map(ctx.workers, one, bundled_names())
    lines = ["### The bundled problems' honest solutions", "", "| problem | verdict | ours | eager | speedup | took |"]
    lines.append("|---|---|---|---|---|---|")
    for row in rows:
        if "seconds" not in row:
            lines.append(f"| {row['problem']} | NOT RUN (deadline) | | | | |")
            continue
        verdict = row["status"] if row["status"] == "correct" else f"**{row['status']}**: {row['reason'][:120]}"
        lines.append(
            f"| {row['problem']} | {verdict} | {_ms(row['runtime_ms'])} | {_ms(row['reference_runtime_ms'])} | "
            f"{_x(row['speedup'])} | {row['seconds']:.0f} s |"
        )
    return {"solutions": rows}, "\n".join(lines) + "\n"
