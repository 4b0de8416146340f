"""From settings to a session's parts: what ``kernel-code optimize`` and a sweep's Ray task both build.

:func:`session_plan` reads the settings (the command line's flags already applied with ``with_flags``)
into a :class:`SessionPlan`: plain values and no secrets, so that it can travel to another machine in
a Ray task's arguments. There :func:`build_generator`, :func:`build_critic` and :func:`build_evaluator`
make the parts, with the API keys taken from that machine's own environment and config files
(``openkernel.settings.key_environment``), never from the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from openkernel.critic import Critic
from openkernel.evaluate import EvalConfig, ProcessEvaluator
from openkernel.events import SessionConfig
from openkernel.generate import Generator
from openkernel.generate.models import ModelRequest, make_critic, make_generator
from openkernel.settings import Settings, default_model
from openkernel.types import Problem

__all__ = ["SessionPlan", "build_critic", "build_evaluator", "build_generator", "provider_base_url", "session_plan"]


@dataclass(frozen=True)
class SessionPlan:
    """How to run a session, besides the problem and where it is recorded."""

    config: SessionConfig  # backend, model, size and budgets: written to the session's config.json
    timeout_s: float  # one candidate's whole evaluation, build included
    base_url: str | None = None  # the generator's server (OpenAI-compatible); None: the provider's own
    critic: str = "rule"  # "rule", or "openai:MODEL" / "anthropic:MODEL" on top of the rules
    critic_base_url: str | None = None  # the LLM critic's server; None: its provider's own
    price_file: Path | None = None  # the user's extra price table ([prices] file)


def provider_base_url(settings: Settings, name: str) -> str | None:
    """The configured server of the provider ``name`` ("openai:gpt-4o") names; None for other kinds."""
    provider = name.partition(":")[0]
    if provider in ("openai", "anthropic"):
        base_url: str | None = getattr(settings, provider).base_url
        return base_url
    return None


def session_plan(
    settings: Settings, critic: str = "rule", base_url: str | None = None, critic_base_url: str | None = None
) -> SessionPlan:
    """The plan ``settings`` describe; a server given here wins over the provider's configured one."""
    model = default_model(settings)
    loop = settings.loop
    config = SessionConfig(
        backend=loop.backend,
        model=model,
        size=settings.evaluate.size,
        max_iterations=loop.iterations,
        wall_time_budget_s=loop.wall_time_budget_s,
        token_budget=loop.token_budget,
        cost_budget_usd=loop.cost_budget_usd,
    )
    return SessionPlan(
        config=config,
        timeout_s=settings.evaluate.timeout_s,
        base_url=base_url or provider_base_url(settings, model),
        critic=critic,
        critic_base_url=critic_base_url or provider_base_url(settings, critic),
        price_file=settings.prices.file,
    )


def build_generator(plan: SessionPlan, problem: Problem, session_dir: Path, env: Mapping[str, str]) -> Generator:
    """The plan's generator; ``env`` holds the API keys (``key_environment``), for the LLM builders only."""
    request = ModelRequest(problem, session_dir, plan.config.backend, plan.base_url, env=env,
                           price_file=plan.price_file)  # fmt: skip
    return make_generator(plan.config.model, request)


def build_critic(plan: SessionPlan, env: Mapping[str, str]) -> Critic:
    return make_critic(plan.critic, plan.critic_base_url, env)


def build_evaluator(plan: SessionPlan, device: str = "auto") -> ProcessEvaluator:
    """The evaluator; ``device`` "cuda" on the GPU a sweep's task was given, "cpu" on a CPU slot."""
    config = EvalConfig(device=device, backend=plan.config.backend, size=plan.config.size, timeout_s=plan.timeout_s)
    return ProcessEvaluator(config)
