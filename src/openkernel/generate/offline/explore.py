"""Choosing the next launch configuration: refine around the best, steered by the critic, never repeat.

Each proposal's intent ends with its configuration in brackets (``[row variant=one_pass ...]``) and
each kernel file carries its own and the ones tried before it, so what was tried is read back from
the context (the history, the best kernel) plus what this generator proposed in this process.
Candidates are the family's whole space minus what was tried and minus moves that go at least as far
as a failed one in the same direction; they are ranked by their distance from the best (nearest
first: refinement) less a bonus for the moves the diagnosis asks for (memory-bound: more loads in
flight; spills: smaller tiles or more warps; compute-bound: bigger tiles...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openkernel.generate.base import Context
from openkernel.generate.offline.configs import AXES, Config, default_config, resolve, space
from openkernel.generate.offline.emit import CONFIG_MARK, TRIED_MARK
from openkernel.generate.offline.patterns import Plan, RowPlan

__all__ = ["Step", "choose", "config_of_intent", "signals_of"]

_TAG = re.compile(r"\[(row|pointwise|tiled|strided|matmul) ([^\]]+)\]\s*$")
# The critic's step titles and headline words -> the signal or bottleneck they stand for.
_WORDS = {
    "memory_bound": "memory_bound",
    "compute_bound": "compute_bound",
    "latency_bound": "latency_bound",
    "under_utilised": "under_utilised",
    "Raise occupancy": "low_occupancy",
    "Cut register pressure": "high_registers",
    "Stop register spills": "register_spills",
    "Raise the L2 hit rate": "low_l2_hit",
    "Stream memory faster": "low_dram_throughput",
    "Use the tensor cores": "low_tensor_pipe",
    "Hide memory latency": "high_stall_memory",
    "Cut barrier waits": "high_stall_barrier",
    "Cut fixed costs": "small_problem",
    "long_rows": "long_rows",
    "online-softmax": "long_rows",
}
_HINTS_WHY = "data read once leaves L2 first, data read again stays"
# Cache hints and persistent rows come last among the memory-bound moves: on an H200 no memory-bound
# problem's best kernel used either (bench/offline_quick.py, BENCHMARKS.md): hints cost 0.3-9% on every
# one-pass and pointwise kernel (within 2.4% either way on looped rows), persistent rows 2.5-23%.
_LATE = 0.25
# (signal, axis, direction) -> (bonus, why). Direction +1: up the axis's list; for "variant" and
# "persistent" and "evict", +1 is the second value (looped, yes, hints).
_PREFER: dict[str, list[tuple[str, str, int, float, str]]] = {
    "row": [
        ("memory_bound", "evict", +1, _LATE, _HINTS_WHY),
        ("memory_bound", "warps", +1, 1.0, "more warps keep more loads in flight"),
        ("low_dram_throughput", "warps", +1, 1.0, "more warps keep more loads in flight"),
        ("high_stall_memory", "warps", +1, 1.0, "more warps hide the memory latency"),
        ("memory_bound", "persistent", +1, _LATE, "persistent programs load the weights once"),
        ("low_occupancy", "warps", +1, 1.0, "fewer registers per thread, more resident warps"),
        ("under_utilised", "ROWS", -1, 0.5, "more programs to fill the SMs"),
        ("high_registers", "warps", +1, 1.0, "the row spread over more threads"),
        ("register_spills", "warps", +1, 1.0, "the row spread over more threads"),
        ("register_spills", "variant", +1, 1.0, "a looped row holds one chunk in registers"),
        ("long_rows", "variant", +1, 1.5, "a looped row holds one chunk in registers"),
        ("small_problem", "ROWS", +1, 1.0, "several rows per program amortise the fixed costs"),
        ("latency_bound", "ROWS", +1, 1.0, "several rows per program amortise the fixed costs"),
        ("latency_bound", "persistent", +1, 0.5, "persistent programs pay the launch once"),
        ("high_stall_barrier", "warps", -1, 1.0, "fewer warps, cheaper block-wide reductions"),
    ],
    "pointwise": [
        ("memory_bound", "evict", +1, _LATE, _HINTS_WHY),
        ("memory_bound", "BLOCK", +1, 1.0, "more bytes in flight per program"),
        ("low_dram_throughput", "BLOCK", +1, 1.0, "more bytes in flight per program"),
        ("high_stall_memory", "warps", +1, 1.0, "more warps hide the memory latency"),
        ("low_occupancy", "warps", +1, 1.0, "more resident warps"),
        ("under_utilised", "BLOCK", -1, 0.5, "more programs to fill the SMs"),
        ("register_spills", "BLOCK", -1, 1.0, "fewer elements per thread"),
        ("high_registers", "warps", +1, 1.0, "fewer elements per thread"),
        ("small_problem", "BLOCK", -1, 0.5, "more programs to fill the SMs"),
    ],
    "tiled": [
        ("memory_bound", "evict", +1, _LATE, _HINTS_WHY),
        ("memory_bound", "ROWS", +1, 1.0, "more bytes in flight per program"),
        ("low_dram_throughput", "BLOCK", +1, 1.0, "more bytes in flight per program"),
        ("high_stall_memory", "warps", +1, 1.0, "more warps hide the memory latency"),
        ("low_occupancy", "warps", +1, 1.0, "more resident warps"),
        ("register_spills", "ROWS", -1, 1.0, "fewer elements per thread"),
        ("small_problem", "ROWS", -1, 0.5, "more programs to fill the SMs"),
    ],
    "strided": [
        ("memory_bound", "BLOCK_I", +1, 1.0, "wider contiguous loads"),
        ("under_utilised", "BLOCK_I", -1, 1.0, "more programs to fill the SMs"),
        ("small_problem", "BLOCK_I", -1, 0.5, "more programs to fill the SMs"),
        ("register_spills", "BLOCK_R", -1, 1.0, "smaller accumulator tiles"),
    ],
    "matmul": [
        ("compute_bound", "BLOCK_N", +1, 1.0, "bigger tiles: more math per byte loaded"),
        ("low_tensor_pipe", "BLOCK_M", +1, 1.0, "bigger tiles keep the tensor cores busier"),
        ("compute_bound", "stages", +1, 0.5, "a deeper pipeline hides the loads behind the math"),
        ("high_stall_memory", "stages", +1, 1.0, "a deeper pipeline hides the loads behind the math"),
        ("low_l2_hit", "GROUP_M", +1, 1.0, "larger groups reuse B tiles in L2"),
        ("register_spills", "BLOCK_N", -1, 1.0, "a smaller accumulator tile"),
        ("high_registers", "BLOCK_N", -1, 1.0, "a smaller accumulator tile"),
        ("low_occupancy", "stages", -1, 1.0, "less shared memory per block, more blocks per SM"),
        ("under_utilised", "BLOCK_M", -1, 1.0, "more tiles to fill the SMs"),
        ("small_problem", "BLOCK_M", -1, 1.0, "more tiles to fill the SMs"),
        ("memory_bound", "BLOCK_K", +1, 0.5, "longer K steps, fewer loop iterations"),
    ],
}
_LABELS = {
    "warps": "warps",
    "ROWS": "rows/program",
    "stages": "stages",
    "variant": "",
    "persistent": "persistent",
    "evict": "cache hints",
}


@dataclass(frozen=True)
class Step:
    config: Config
    intent: str


def config_of_intent(intent: str | None) -> Config | None:
    match = _TAG.search(intent or "")
    return Config.parse(match.group(1), match.group(2)) if match else None


def _marked(source: str | None, mark: str) -> list[str]:
    for line in (source or "").splitlines():
        if line.startswith(mark):
            return [part.strip() for part in line[len(mark) :].split(";") if part.strip()]
    return []


def best_and_tried(context: Context, family: str) -> tuple[Config | None, set[Config]]:
    """The best kernel's config (None when it is not ours), and every config the context shows tried."""
    best = None
    own = _marked(context.best_source, CONFIG_MARK)
    if own and own[0].startswith(family + " "):
        best = Config.parse(family, own[0][len(family) + 1 :])
    tried = {c for text in _marked(context.best_source, TRIED_MARK) if (c := Config.parse(family, text))}
    tried |= {c for r in context.history if (c := config_of_intent(r.intent)) is not None and c.family == family}
    return best, tried | ({best} if best else set())


def signals_of(context: Context) -> list[str]:
    """The bottleneck and signals the critic named, in the order the words first appear."""
    text = "\n".join(t for t in (context.diagnosis, context.skills) if t)
    found = [(text.find(word), signal) for word, signal in _WORDS.items() if word in text]
    return list(dict.fromkeys(signal for _, signal in sorted(found)))


def _direction(config: Config, base: Config, axis: str) -> int:
    return config.index(axis) - base.index(axis)


def _blocked(candidate: Config, base: Config, failed: list[Config]) -> bool:
    """A move that goes at least as far as a failed one, in each of its directions, fails the same way."""
    for bad in failed:
        moves = {a: _direction(bad, base, a) for a, _ in AXES[base.family] if _direction(bad, base, a)}
        if moves and all(_direction(candidate, base, a) * d >= d * d for a, d in moves.items()):
            return True
    return False


def _change(config: Config, base: Config) -> str:
    parts = []
    for axis, value in config.knobs:
        old = base[axis]
        if old == value:
            continue
        if axis == "variant":
            parts.append(f"{str(old).replace('_', '-')} -> {str(value).replace('_', '-')}")
        else:
            parts.append(f"{_LABELS.get(axis, axis)} {old} -> {value}".strip())
    return ", ".join(parts)


def _hinted(plan: Plan, base: Config, hints: tuple[str, ...]) -> Config | None:
    """A config the user's hints name ("BLOCK 2048", "warps=8", "looped", "persistent", "cache hints"), if any."""
    changes: dict[str, int | str] = {}
    axes = dict(AXES[base.family])
    for hint in hints:
        for axis, value in re.findall(
            r"\b(BLOCK_[MNK]|BLOCK|warps|ROWS|rows|stages|GROUP_M)\s*[=:]?\s*(\d+|auto)", hint
        ):
            name = "ROWS" if axis == "rows" else axis
            options = [v for v in axes.get(name, ()) if str(v) == value]
            if options:
                changes[name] = options[0]
        for word, axis, value in (("looped", "variant", "looped"), ("one-pass", "variant", "one_pass")):
            if word in hint and axis in axes:
                changes[axis] = value
        if "persistent" in hint and "persistent" in axes:
            changes["persistent"] = "no" if "not persistent" in hint or "no persistent" in hint else "yes"
        if re.search(r"\bevict|cache hints?\b", hint) and "evict" in axes:
            changes["evict"] = "none" if re.search(r"\bno (cache hints?|evict)", hint) else "hints"
    return base.with_(**changes) if changes else None


def choose(plan: Plan, context: Context, remembered: set[Config]) -> Step | str:
    """The next config and its intent, or why there is none (every config tried).

    Configs are compared with their "auto" knobs resolved at the traced size, so "warps auto" (8 warps
    for a 4096-long row) and "warps 8" count as one.
    """
    first = default_config(plan)
    family = first.family
    best, tried_raw = best_and_tried(context, family)
    tried = {resolve(plan, c) for c in tried_raw | {c for c in remembered if c.family == family}}
    failed = [resolve(plan, c) for r in context.history if r.status != "correct" and (c := config_of_intent(r.intent))]
    shown = best or first  # the intent names changes from the best as written
    base = resolve(plan, shown)
    if base == resolve(plan, first) and resolve(plan, first) not in tried:
        words = _first_words(plan, first)
        return Step(first, f"{plan.template} template, best guess: {words} [{family} {first.tag()}]")
    valid: dict[Config, Config] = {}
    for c in space(plan):
        valid.setdefault(resolve(plan, c), c)
    hinted = _hinted(plan, base, context.hints)
    if hinted is not None and hinted not in tried and hinted in valid:
        chosen = valid[hinted]
        return Step(chosen, f"{_change(hinted, base) or 'as the hint asks'} (user hint) [{family} {chosen.tag()}]")
    signals = signals_of(context)
    prefer = [p for p in _PREFER[family] if p[0] in signals]

    def bonus(c: Config) -> tuple[float, str]:
        total, why = 0.0, ""
        for signal, axis, direction, weight, reason in prefer:
            if _direction(c, base, axis) * direction > 0:
                total += weight
                why = why or f"{signal}: {reason}"
        return total, why

    ranked = []
    for order, c in enumerate(valid):
        if c in tried or _blocked(c, base, failed):
            continue
        distance = sum(abs(_direction(c, base, axis)) for axis, _ in AXES[family])
        gain, why = bonus(c)
        ranked.append((distance - gain, order, c, why))
    if not ranked:
        return (
            f"offline generator: search space exhausted ({len(tried)} of {len(valid)} {family} configurations "
            f"tried around the best, the rest blocked by failures): use --model with an LLM to go further"
        )
    _, _, chosen, why = min(ranked, key=lambda r: (r[0], r[1]))
    note = why or ("refining around the best" if best else "the best guess failed: trying a neighbour")
    return Step(valid[chosen], f"{_change(chosen, base)} ({note}) [{family} {valid[chosen].tag()}]")


def _first_words(plan: Plan, config: Config) -> str:
    if isinstance(plan, RowPlan) and config.family == "row":
        if config["variant"] == "looped":
            return f"looped rows, BLOCK {config['BLOCK']}"
        rows = "one row" if config["ROWS"] == 1 else f"{config['ROWS']} rows"
        return f"{rows} per program in registers, warps {config['warps']}"
    return ", ".join(f"{k} {v}" for k, v in config.knobs)
