"""The optional LLM critic: the rule-based diagnosis and the measurements go to a model, which writes the advice.

The rules always run first: their diagnosis holds the measured facts (headline, evidence, signals,
changes since the best), and those are kept as they are. The model is asked, through the same
client as the LLM generator (:class:`openkernel.generate.client.LLMClient`: official SDKs,
streaming, our retries and timeout, the key redacted), for one JSON object: the bottleneck, a
summary and ranked next steps. A valid answer replaces the rules' lead and next steps, and the
diagnosis says which model wrote them (``Diagnosis.critic``).

Any failure (HTTP errors after the retries, a timeout, a refused key, a reply that is not the JSON
asked for) returns the rules' diagnosis unchanged but for ``Diagnosis.note``, which says why the
model's answer was not used: the loop never stops for the critic.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from openkernel.critic import Critic, RuleCritic
from openkernel.critic.model import Diagnosis, KernelMetrics, NextStep, Snapshot
from openkernel.critic.steps import MAX_STEPS
from openkernel.errors import ConfigError
from openkernel.generate.client import LLMClient, LLMConfig, LLMFailure
from openkernel.skills.library import BOTTLENECKS

__all__ = ["CRITIC_PROMPT_VERSION", "LLMCritic", "render_critic_prompt"]

CRITIC_PROMPT_VERSION = "1"  # bump when prompts/critic_system.md or prompts/critic.md change meaning


@dataclass(frozen=True)
class _Answer:
    bottleneck: str | None
    summary: str
    steps: tuple[tuple[str, str, str], ...]  # (title, why, expected_effect), best first


class _BadAnswer(Exception):
    """The reply is not the JSON object the prompt asked for; ``str(err)`` says how."""


class LLMCritic(Critic):
    """Asks an LLM for the advice on top of ``fallback``'s diagnosis; falls back to it on any failure."""

    def __init__(
        self,
        config: LLMConfig,
        key: str,
        fallback: Critic | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.name = f"{config.provider}:{config.model}"
        self.fallback = fallback if fallback is not None else RuleCritic()
        self._client = LLMClient(config, key, sleep)

    def __repr__(self) -> str:
        return f"LLMCritic({self.config!r})"  # never the key

    def critique(
        self,
        current: Snapshot,
        best: Snapshot | None,
        op_classes: tuple[str, ...],
        hardware: str | None = None,
        backend: str | None = None,
    ) -> Diagnosis:
        rules = self.fallback.critique(current, best, op_classes, hardware, backend)
        system, user = render_critic_prompt(current, best, rules, backend)
        try:
            answer = _parse(self._client.complete(system, user).text)
        except (LLMFailure, _BadAnswer, ConfigError) as err:
            reason = self._client.redact(str(err))
            return dataclasses.replace(rules, note=f"the LLM critic {self.name} was not used: {reason}")
        measured = current.status == "correct"  # a failed or untimed kernel has no bottleneck to name
        steps = tuple(
            NextStep(title, why, (), effect, rank, profile_driven=rules.bottleneck is not None)
            for rank, (title, why, effect) in enumerate(answer.steps, start=1)
        )
        return dataclasses.replace(
            rules,
            bottleneck=rules.bottleneck or (answer.bottleneck if measured else None),
            next_steps=steps,
            lead=answer.summary,
            critic=self.name,
        )


def render_critic_prompt(
    current: Snapshot, best: Snapshot | None, rules: Diagnosis, backend: str | None
) -> tuple[str, str]:
    """The system prompt and the user prompt for a review of ``current``, from the prompt files in the package."""
    sections = {
        "iteration": str(current.iteration),
        "backend": backend or "unknown backend",
        "measured": _lines(_measured(current)),
        "roofline": _lines(_roofline(current)),
        "kernels": _lines(_kernel(k) for k in current.kernels) or "None recorded.",
        "best": _lines(_best(best)),
        "rules": _lines(_rules(rules)),
    }
    return _prompt_file("critic_system.md").strip(), Template(_prompt_file("critic.md")).substitute(sections)


def _prompt_file(name: str) -> str:
    return resources.files("openkernel.generate").joinpath("prompts", name).read_text(encoding="utf-8")


def _lines(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _measured(snap: Snapshot) -> list[str]:
    lines = [f"status: {snap.status}"]
    if snap.intent:
        lines.append(f"what it tried: {snap.intent}")
    lines.append("runtime: not timed" if snap.runtime_ms is None else f"runtime: {snap.runtime_ms:.4g} ms")
    if snap.speedup is not None:
        lines.append(f"speedup over the reference: {snap.speedup:.3g}x")
    lines.extend(f"evaluator: {reason}" for reason in snap.reasons)
    return lines


def _roofline(snap: Snapshot) -> list[str]:
    roof = snap.roofline
    if roof is None:
        return ["not known (the work was not counted, or the GPU is not in the hardware table)"]
    lines = [
        f"{roof.flops:,} FLOP ({roof.dtype}, {roof.compute_ceiling} ceiling {roof.peak_flops_per_s:.3g} FLOP/s, "
        f"{roof.peak_flops_source})",
        f"{roof.min_bytes:,} bytes at least ({roof.bandwidth_bytes_per_s:.3g} bytes/s, {roof.bandwidth_source})",
        f"speed of light {roof.sol_time_ms:.3g} ms, bound by {roof.bound_by} "
        f"(compute {roof.compute_time_ms:.3g} ms, memory {roof.memory_time_ms:.3g} ms)",
    ]
    if roof.measured_time_ms is None:
        lines.append("no GPU timing of the target to place the kernel against it")
    else:
        pct = "unknown" if roof.pct_of_peak is None else f"{roof.pct_of_peak:.3g}%"
        headroom = "unknown" if roof.headroom is None else f"{roof.headroom:.3g}x"
        lines.append(f"measured {roof.measured_time_ms:.4g} ms: {pct} of the {roof.bound_by} ceiling, {headroom} "
                     "the speed of light")  # fmt: skip
    lines.extend(roof.evidence[1:])
    return lines


def _kernel(k: KernelMetrics) -> str:
    known = [
        f"{f.name}={_value(getattr(k, f.name))}"
        for f in dataclasses.fields(k)
        if f.name != "name" and getattr(k, f.name) not in (None, ())
    ]
    return f"{k.name or 'kernel'}: {', '.join(known) or 'no counters'}"


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, tuple):
        return "; ".join(f"{name} {pct:.3g}%" for name, pct in value)
    return str(value)


def _best(best: Snapshot | None) -> list[str]:
    if best is None:
        return ["none yet"]
    timed = "not timed" if best.runtime_ms is None else f"{best.runtime_ms:.4g} ms"
    speedup = "" if best.speedup is None else f", {best.speedup:.3g}x the reference"
    return [f"iteration {best.iteration} ({best.intent or 'no intent'}): {best.status}, {timed}{speedup}"]


def _rules(rules: Diagnosis) -> list[str]:
    lines = [rules.headline, f"bottleneck: {rules.bottleneck or 'unknown'}", *rules.evidence]
    if rules.signals:
        lines.append(f"signals: {', '.join(rules.signals)}")
    lines.extend(f"since the best: {change}" for change in rules.changes)
    lines.extend(f"suggested step {s.rank}: {s.title} ({s.why})" for s in rules.next_steps)
    return lines


def _parse(text: str) -> _Answer:
    """The answer in ``text``: one JSON object, bare or in a code fence; ``_BadAnswer`` saying what is wrong."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise _BadAnswer("the reply holds no JSON object")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as err:
        raise _BadAnswer(f"the reply's JSON does not parse ({err})") from None
    if not isinstance(data, dict):
        raise _BadAnswer("the reply's JSON is not an object")
    bottleneck = data.get("bottleneck")
    if bottleneck is not None and bottleneck not in BOTTLENECKS:
        raise _BadAnswer(f"bottleneck {bottleneck!r} is not null or one of {', '.join(BOTTLENECKS)}")
    summary = _text(data, "summary", "the reply")
    raw_steps = data.get("next_steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _BadAnswer("the reply has no next_steps list")
    steps = []
    for index, step in enumerate(raw_steps[:MAX_STEPS], start=1):
        if not isinstance(step, dict):
            raise _BadAnswer(f"next step {index} is not an object")
        where = f"next step {index}"
        steps.append((_text(step, "title", where), _text(step, "why", where), _text(step, "expected_effect", where)))
    return _Answer(bottleneck, summary.rstrip(". "), tuple(steps))


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _BadAnswer(f"{where} has no {key!r} text")
    return " ".join(value.split())
