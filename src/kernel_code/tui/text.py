"""What the panels say, as pure functions of the session model (rich ``Text``, no widgets).

Every colour here has a symbol or a word beside it (``↑`` keep, ``·`` discard, ``×`` error, ``★``
best), so that the screen reads the same without colour, in a capture-pane dump or a snapshot file.
"""

from __future__ import annotations

from importlib import metadata

from rich.text import Text

from kernel_code.tui.state import ChatKind, IterationView, ProfileView, SessionModel
from openkernel.critic import L2_HIT_GOOD_PCT, L2_HIT_POOR_PCT
from openkernel.events import DecisionKind

__all__ = [
    "BARS",
    "DECISION_STYLE",
    "DECISION_SYMBOL",
    "NOT_GPU",
    "chat_text",
    "decision_text",
    "device_label",
    "header_text",
    "judge_l2",
    "profile_text",
    "speedup_text",
    "trajectory_text",
    "version",
]

BARS = "▁▂▃▄▅▆▇█"
NOT_GPU = "not GPU timings"
DECISION_SYMBOL: dict[DecisionKind | None, str] = {"keep": "↑", "discard": "·", "error": "×", None: "…"}
DECISION_WORD: dict[DecisionKind | None, str] = {"keep": "keep", "discard": "disc", "error": "err", None: "···"}
DECISION_STYLE: dict[DecisionKind | None, str] = {
    "keep": "bold green",
    "discard": "yellow",
    "error": "bold red",
    None: "dim",
}
BEST_SYMBOL, BEST_STYLE = "★", "bold magenta"
_CHAT_STYLE: dict[ChatKind, str] = {
    "info": "cyan",
    "generator": "",
    "ok": "green",
    "bad": "red",
    "up": "bold green",
    "critic": "italic magenta",
    "user": "bold blue",
    "warn": "yellow",
}


def version() -> str:
    try:
        return metadata.version("kernel-code")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "dev"


def device_label(device: str | None) -> str:
    """ "cuda:0 (NVIDIA H200)" -> "H200"; the CPU says it runs the interpreter."""
    if device is None:
        return "—"
    if device.startswith("cpu"):
        return "CPU · interpreter"
    inner = device[device.find("(") + 1 : device.rfind(")")] if "(" in device else device
    return inner.removeprefix("NVIDIA ").strip()


def speedup_text(speedup: float | None) -> str:
    return "—" if speedup is None else f"{speedup:.2f}x"


def header_text(
    model: SessionModel, width: int, pending_backend: str | None = None, trace: bool = False, read_only: bool = False
) -> Text:
    """One line: version, GPU, backend (and a pending switch), problem, state, iterations, model, usage, trace.

    Parts are dropped from the least needed (trace, then the model's name, then usage) until the line
    fits ``width``; GPU, backend, problem, state and the iteration count always stay.
    """
    backend = (model.backend or "—") + (f" → {pending_backend} next" if pending_backend else "")
    budget = f"/{model.max_iterations}" if model.max_iterations is not None else ""
    cost = "" if model.total_cost_usd is None else f" ${model.total_cost_usd:.2f}"
    state = {"starting": "○ starting", "running": "● running", "paused": "⏸ PAUSED", "finished": "■ finished"}
    style = {"starting": "dim", "running": "green", "paused": "bold yellow", "finished": "bold cyan"}
    # (text, style, priority: lower is dropped first)
    parts: list[tuple[str, str, int]] = [
        (f"kernel code v{version()}", "bold", 3),
        (f"[{device_label(model.device)}]", "bold", 9),
        (f"[{backend}]", "bold", 9),
        (f"[{model.problem or '—'}]", "bold", 9),
        (state[model.phase], style[model.phase], 9),
        (f"iter {model.completed}{budget}", "", 9),
        (model.model or "—", "", 1),
        (f"{model.total_tokens:,} tok{cost}", "", 2),
        (f"trace {'on' if trace else 'off'}", "dim", 0),
    ]
    if read_only:
        parts.append(("▷ replay", "bold blue", 9))
    for floor in range(10):
        kept = [p for p in parts if p[2] >= floor]
        if sum(len(t) + 1 for t, _, _ in kept) < width:
            break
    text = Text(" ")
    for i, (part, part_style, _) in enumerate(kept):
        text.append(("" if i == 0 else " ") + part, style=part_style)
    return text


def trajectory_text(model: SessionModel, width: int) -> Text:
    """Three lines: a bar per iteration (the last ``width``), its decision symbol, the best figure."""
    rows = model.speedups(max(1, width))
    values = [s for _, s, _ in rows if s is not None]
    top = max(values, default=1.0) or 1.0
    bars, marks = Text(), Text()
    for iteration, speedup, decision in rows:
        style = BEST_STYLE if iteration == model.best_iteration else DECISION_STYLE[decision]
        if speedup is None:
            bars.append("×" if decision == "error" else " ", style=style)
        else:
            bars.append(BARS[min(len(BARS) - 1, int(speedup / top * (len(BARS) - 1) + 0.5))], style=style)
        symbol = BEST_SYMBOL if iteration == model.best_iteration else DECISION_SYMBOL[decision]
        marks.append(symbol, style=style)
    if not rows:
        bars.append("waiting for the first iteration…", style="dim")
    best = Text("best ", style="bold")
    best.append(speedup_text(model.best_speedup), style=BEST_STYLE)
    if model.best_iteration is not None:
        best.append(f" (#{model.best_iteration} {BEST_SYMBOL})")
    if model.timings_are_gpu is False:
        best.append(f" · {NOT_GPU}", style="bold yellow")
    best.append("  ↑keep ·disc ×err", style="dim")
    return Text("\n").join([bars, marks, best])


def judge_l2(pct: float) -> str:
    """The critic's grading of an L2 hit rate: poor under 50%, good from 80%, ok between."""
    if pct < L2_HIT_POOR_PCT:
        return "poor"
    return "good" if pct >= L2_HIT_GOOD_PCT else "ok"


def profile_text(model: SessionModel) -> Text:
    """Bottleneck, bandwidth, L2 hit, occupancy, headroom of the latest evaluated kernel; "—" if unmeasured."""
    p: ProfileView | None = model.profile
    bottleneck = (p.bottleneck if p else None) or (model.diagnosis.bottleneck if model.diagnosis else None)
    bandwidth = p.bandwidth_pct_of_peak if p else None
    l2 = p.l2_hit_rate_pct if p else None
    occupancy = p.achieved_occupancy_pct if p else None
    headroom = p.headroom if p else None
    rows = [
        ("Bottleneck:", bottleneck or "—"),
        ("Bandwidth:", "—" if bandwidth is None else f"{bandwidth:.0f}% of peak"),
        ("L2 hit:", "—" if l2 is None else f"{l2:.0f}% ({judge_l2(l2)})"),
        ("Occupancy:", "—" if occupancy is None else f"{occupancy / 100:.2f}"),
        ("Headroom:", "—" if headroom is None else f"~{headroom:.1f}x"),
    ]
    text = Text()
    for label, value in rows:
        text.append(f"{label:<12}", style="bold")
        text.append(value + "\n", style="dim" if value == "—" else "")
    if model.timings_are_gpu is False:
        text.append(f"⚠ {NOT_GPU}", style="bold yellow")
        text.append(f": {model.timing_note}" if model.timing_note else ": measured off the GPU, not comparable")
    elif p is not None and p.sol_time_ms is not None:
        text.append(f"speed of light {p.sol_time_ms:.3g} ms", style="dim")
    elif any(v.status is not None for v in model.iterations.values()):
        text.append("no roofline for this kernel", style="dim")
    else:
        text.append("no kernel evaluated yet", style="dim")
    return text


def decision_text(view: IterationView, best_iteration: int | None) -> Text:
    if view.iteration == best_iteration and view.decision == "keep":
        return Text(f"{BEST_SYMBOL} keep", style=BEST_STYLE)
    symbol, word = DECISION_SYMBOL[view.decision], DECISION_WORD[view.decision]
    return Text(f"{symbol} {word}", style=DECISION_STYLE[view.decision])


def chat_text(kind: ChatKind, text: str) -> Text:
    return Text(text, style=_CHAT_STYLE[kind])
