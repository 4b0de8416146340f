"""Readable summaries of engine results for the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from openkernel import EvalResult, EvalStatus
from openkernel.critic import Diagnosis

__all__ = ["print_diagnosis", "print_result"]

_MARK = {
    EvalStatus.CORRECT: ("✓", "green"),
    EvalStatus.INCORRECT: ("✗", "red"),
    EvalStatus.COMPILE_ERROR: ("✗", "red"),
    EvalStatus.RUNTIME_ERROR: ("✗", "red"),
    EvalStatus.TIMEOUT: ("⧗", "yellow"),
    EvalStatus.REJECTED: ("⚠", "magenta"),
    EvalStatus.COMPILED: ("◌", "cyan"),
}


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} ms"


def print_result(result: EvalResult, console: Console | None = None) -> None:
    console = console or Console()
    mark, colour = _MARK.get(result.status, ("?", "white"))
    console.print(
        f"[bold {colour}]{mark} {result.status.value}[/]  {result.problem} ← {result.candidate}  "
        f"[dim]({result.backend}, {result.device}, size {result.size})[/]"
    )
    for reason in result.reasons:
        console.print(f"  • {reason}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("")
    table.add_column("median", justify="right")
    table.add_column("spread (p10–p90)", justify="right")
    table.add_column("samples", justify="right")
    for label, stats in (("candidate", result.candidate_timing), ("reference", result.reference_timing)):
        if stats is None:
            table.add_row(label, "—", "—", "—")
        else:
            table.add_row(label, _ms(stats.median_ms), f"±{stats.spread_pct / 2:.1f}%", str(stats.samples))
    if result.compile_baseline_runtime_ms is not None:
        table.add_row("torch.compile", _ms(result.compile_baseline_runtime_ms), "", "")
    console.print(table)
    if result.speedup is not None:
        flag = "" if result.timing_valid else " [yellow](not a GPU timing)[/]"
        console.print(f"  speedup: [bold]{result.speedup:.2f}x[/]{flag}")
    if result.profile is not None:
        p = result.profile
        head = "—" if p.headroom is None else f"~{p.headroom:.1f}x"
        bottleneck = p.bottleneck or "not measured"
        console.print(
            f"  roofline: {p.flop_count.total_flops:,} FLOP · {p.min_bytes:,} B · "
            f"intensity {p.arithmetic_intensity_flops_per_byte:.2f} FLOP/B · speed of light {p.sol_time_ms:.3g} ms "
            f"({p.bound_by}) · bottleneck {bottleneck} · headroom {head}"
        )
    if result.timing_note:
        console.print(f"  [yellow]note:[/] {result.timing_note}")
    for warning in result.warnings:
        console.print(f"  [yellow]warning:[/] {warning}")
    if result.kernels_launched:
        launched = ", ".join(f"{k.name}×{k.launches}" for k in result.kernels_launched)
        console.print(f"  [dim]kernels launched: {launched}[/]")
    phases = " · ".join(f"{name} {seconds:.1f}" for name, seconds in result.phase_seconds.items())
    console.print(f"  [dim]{len(result.trials)} outputs checked · {result.wall_seconds:.1f} s ({phases})[/]")


def print_diagnosis(diagnosis: Diagnosis, console: Console | None = None) -> None:
    """The critic's headline, evidence and ranked next steps, each with the skills it points at."""
    console = console or Console()
    console.print(f"[bold]Critic:[/] {diagnosis.headline}")
    for line in diagnosis.evidence:
        console.print(f"  [dim]·[/] {line}")
    for step in diagnosis.next_steps:
        skills = f" [dim]→ {', '.join(step.skill_ids)}[/]" if step.skill_ids else ""
        console.print(f"  {step.rank}. {step.title}{skills}")
