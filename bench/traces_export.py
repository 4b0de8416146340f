"""Time the traces export of a 1,000-iteration session (the target: under 1 s).

Builds a recorded-looking session directory with the real store: every iteration has a real
rendered LLM prompt (problem, best kernel, history, diagnosis), a streamed reply of a few KB, a
real kernel file, an evaluation with its roofline profile and a diagnosis. Then times what
``kernel-code traces export`` does for it (read the session, build the trace, scrub it, write the
zstd Parquet file), best of a few runs, and prints the figure.

    PYTHONPATH=src python3 bench/traces_export.py [--iterations 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from openkernel.critic import Diagnosis, NextStep  # noqa: E402
from openkernel.events import (  # noqa: E402
    Decision,
    DiagnosisMade,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
    UsageUpdate,
    to_json,
)
from openkernel.generate.base import Context, PastResult  # noqa: E402
from openkernel.generate.llm import full_prompt, render_prompt  # noqa: E402
from openkernel.hardware import Ceilings, ComputeCeiling  # noqa: E402
from openkernel.problems import load_problem  # noqa: E402
from openkernel.profile import FlopCount, FlopRule, analyse  # noqa: E402
from openkernel.store import DirectoryStore  # noqa: E402
from openkernel.traces.build import build_trace  # noqa: E402
from openkernel.traces.write import write_session  # noqa: E402
from openkernel.types import EvalResult, EvalStatus  # noqa: E402

CEILINGS = Ceilings("NVIDIA H200", 4.8e12, "datasheet", (ComputeCeiling("fp32", 67e12, "datasheet"),))
KERNEL = (ROOT / "tests" / "solutions" / "softmax_fp32.py").read_text()


def _result(iteration: int, runtime_ms: float | None) -> EvalResult:
    count = FlopCount(335_544_320, (FlopRule("softmax", "aten._softmax", 335_544_320),), "float32")
    return EvalResult(
        EvalStatus.CORRECT if runtime_ms is not None else EvalStatus.INCORRECT,
        ("all checks passed",) if runtime_ms is not None else (f"output differs at {iteration} elements",),
        "softmax_fp32", f"kernels/iter_{iteration:04d}.py", "triton", "cuda:0 (NVIDIA H200)", "full",
        runtime_ms is not None, None, runtime_ms, 0.31, 0.31 / runtime_ms if runtime_ms else None, None,
        None, None, (), (), (), (), analyse(count, 536_870_912, torch.float32, CEILINGS, runtime_ms), (), 4.2, "",
    )  # fmt: skip


def _diagnosis(iteration: int) -> Diagnosis:
    steps = tuple(NextStep(f"Step {k} for {iteration}", "bandwidth 61% of peak", ("fusion",), "1.2x", k, True)
                  for k in (1, 2, 3))  # fmt: skip
    return Diagnosis("memory_bound", f"Bottleneck: memory_bound · iteration {iteration}",
                     ("achieved 2.9 TB/s = 61% of the 4.8 TB/s datasheet bandwidth",), ("low_l2_hit",), (), steps,
                     "Bandwidth improved to 61%")  # fmt: skip


def make_session(home: Path, iterations: int) -> Path:
    """A recorded-looking session of ``iterations`` iterations under ``home``."""
    problem = load_problem("softmax_fp32")
    source = problem.path.read_text()
    config = SessionConfig("triton", "anthropic:claude-test", "full", iterations, None, None, None)
    store = DirectoryStore.create_at(home / "bench-session", problem.name, config)
    sid, now = store.session_id, 1_795_000_000.0
    events: list[Event] = []  # appended in one write at the end: 10,000 fsyncs would only time the disk
    events.append(SessionStarted(sid, now, problem.name, str(problem.path), "triton", config.model,
                                "cuda:0 (NVIDIA H200)", "NVIDIA H200", config))  # fmt: skip
    history: list[PastResult] = []
    total = 0
    for it in range(iterations):
        t = now + 10.0 * it
        runtime_ms = None if it % 4 == 3 else 0.30 - 0.0001 * it
        context = Context(it, problem.name, source, "triton", KERNEL, 1.5, tuple(history[-5:]),
                          _diagnosis(it).headline + "\n" + "\n".join(s.title for s in _diagnosis(it).next_steps),
                          "- fuse the max and the sum into one pass\n" * 8, (), None)  # fmt: skip
        store.write_prompt(it, full_prompt(*render_prompt(context)))
        kernel = KERNEL.replace("BLOCK", f"BLOCK_{it}")
        reply = f"Intent: variant {it}\n\nThe previous kernel reads x twice. " * 20 + f"```python\n{kernel}```\n"
        events.append(IterationStarted(sid, t, it, None, "triton", ()))
        for k in range(0, len(reply), 1024):
            events.append(GeneratorDelta(sid, t + 1, it, reply[k : k + 1024]))
        total += 4000
        events.append(UsageUpdate(sid, t + 2, it, 3000, 1000, 0.02, total, 0.02 * (it + 1)))
        path = store.path / "kernels" / f"iter_{it:04d}.py"  # what store.write_kernel writes, minus its checks
        path.write_text(kernel)
        digest = hashlib.sha256(kernel.encode()).hexdigest()
        events.append(KernelProposed(sid, t + 2, it, path.relative_to(store.path).as_posix(), f"variant {it}", digest))
        result = _result(it, runtime_ms)
        events.append(EvaluationFinished(sid, t + 6, it, result.to_json()))
        events.append(DiagnosisMade(sid, t + 7, it, _diagnosis(it).to_json()))
        kind = "keep" if runtime_ms is not None else "error"
        events.append(Decision(sid, t + 8, it, kind, "faster", result.speedup, it if kind == "keep" else it - 1))
        history.append(PastResult(it, f"variant {it}", result.status.value, result.speedup, result.reasons))
    events.append(SessionFinished(sid, now + 10.0 * iterations, "iteration budget spent", iterations - 2, 1.1,
                                 iterations))  # fmt: skip
    lines = [json.dumps(to_json(e), ensure_ascii=False, allow_nan=False) + "\n" for e in events]
    (store.path / "events.jsonl").write_text("".join(lines), encoding="utf-8")
    return store.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        session = make_session(home, args.iterations)
        size = sum(p.stat().st_size for p in session.rglob("*") if p.is_file())
        times, timings = [], []
        for k in range(args.repeat):
            started = time.perf_counter()
            row = build_trace(session)
            built = time.perf_counter()
            written = write_session(row, home / f"traces-{k}")
            done = time.perf_counter()
            times.append(done - started)
            timings.append((built - started, done - built))
        best = min(range(args.repeat), key=lambda k: times[k])
        print(
            f"export of {args.iterations} iterations ({size / 1e6:.1f} MB of session, "
            f"{written.path.stat().st_size / 1e6:.2f} MB of Parquet): {times[best]:.3f} s "
            f"(read + build + scrub {timings[best][0]:.3f} s, write {timings[best][1]:.3f} s; best of {args.repeat})"
        )


if __name__ == "__main__":
    main()
