"""The training export: the best iterations by speedup as instruction -> kernel pairs (JSONL).

Only correct, timed iterations with a kernel and a known reference qualify; the best ``top`` fraction
of them (rounded up, so any non-empty pool gives at least one pair) is kept, fastest first. The
instruction is what the generator had to go on: the reference problem, the target (GPU and
backend), and the iteration's own context (its approach, the user's hints, and the critic's
diagnosis of the kernel before it). The output is the kernel file as evaluated. Everything in the
traces was scrubbed of secrets when they were written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from openkernel.errors import ConfigError

__all__ = ["SftPair", "check_top", "instruction", "select_pairs", "write_pairs"]


@dataclass(frozen=True)
class SftPair:
    """One JSONL line: the instruction and the kernel, and where the pair came from."""

    instruction: str
    output: str  # the kernel file
    session_id: str
    iteration: int
    problem: str  # "L1#23" or "custom:<name>"
    hardware: str
    backend: str
    model: str  # the model that wrote the kernel
    speedup: float
    timing_valid: bool  # False: timed on the CPU (Triton interpreter), a weak signal


def check_top(top: float) -> float:
    if not 0.0 < top <= 1.0:  # NaN fails this too
        raise ConfigError(f"--top must be a fraction in (0, 1], e.g. 0.1 for the best 10%, got {top:g}")
    return top


def select_pairs(table: pa.Table, top: float) -> list[SftPair]:
    """The best ``top`` fraction of the qualifying iterations in ``table``, fastest first."""
    check_top(top)
    pool: list[SftPair] = []
    for session in table.to_pylist():
        previous_diagnosis: dict[str, Any] | None = None
        for it in session["iterations"] or []:
            result = it["eval_result"]
            qualifies = (
                result is not None
                and result["correctness"]
                and result["speedup"] is not None
                and it["kernel_code"] is not None
                and session["problem_source"] is not None
            )
            if qualifies:
                pool.append(
                    SftPair(
                        instruction=instruction(session, it, previous_diagnosis),
                        output=it["kernel_code"],
                        session_id=session["session_id"],
                        iteration=it["iteration"],
                        problem=session["problem"]["key"],
                        hardware=session["hardware"],
                        backend=it["backend"] or session["backend"],
                        model=session["model"],
                        speedup=result["speedup"],
                        timing_valid=bool(result["timing_valid"]),
                    )
                )
            if it["critic_diagnosis"] is not None:
                previous_diagnosis = it["critic_diagnosis"]
    pool.sort(key=lambda p: (-p.speedup, p.session_id, p.iteration))
    count = math.ceil(round(top * len(pool), 9))  # round first: 0.1 * 30 is 3.0000000000000004
    return pool[:count]


def instruction(session: dict[str, Any], iteration: dict[str, Any], diagnosis: dict[str, Any] | None) -> str:
    """The prompt of one pair, in plain Markdown (one trace row and one of its iterations)."""
    backend = iteration["backend"] or session["backend"]
    parts = [
        f"Write a faster {backend} kernel for this PyTorch reference, to run on {session['hardware']}. Reply with "
        "one Python file that defines `ModelNew`, with the same constructor arguments, inputs and outputs as `Model`.",
        f"## Reference: {session['problem']['key']}\n\n```python\n{session['problem_source'].rstrip()}\n```",
    ]
    if iteration["intent"]:
        parts.append(f"## Approach\n\n{iteration['intent']}")
    if diagnosis is not None:
        steps = "".join(f"\n- {s['title']}" for s in diagnosis["next_steps"] or [])
        parts.append(f"## Profile of the kernel before this one\n\n{diagnosis['headline']}{steps}")
    if iteration["hints"]:
        parts.append("## Hints\n\n" + "\n".join(f"- {h}" for h in iteration["hints"]))
    return "\n\n".join(parts) + "\n"


def write_pairs(pairs: Sequence[SftPair], path: Path) -> Path:
    """One JSON object per line, keys in the order of :class:`SftPair`'s fields."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(asdict(p), ensure_ascii=False) + "\n" for p in pairs]
    path.write_text("".join(lines), encoding="utf-8")
    return path
