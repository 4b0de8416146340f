"""From a model name to a generator (``--model``), and from a critic name to a critic (``--critic``).

Engine-side so that anything that builds a session can use it: the command line, and a sweep's Ray
task on another machine (``openkernel.sweeps``). A model name is ``KIND`` or ``KIND:ARGUMENT``
(``openai:gpt-4.1``, ``human:my_kernel.py``). Each kind has one builder below; the LLM SDKs are
imported only when an LLM is chosen, so the rest of the tool starts (and runs on a machine without
them) without paying for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openkernel.critic import Critic, RuleCritic
from openkernel.errors import ConfigError
from openkernel.generate import Generator
from openkernel.types import Problem

__all__ = ["CRITIC_HELP", "MODEL_HELP", "ModelRequest", "make_critic", "make_generator"]

MODEL_HELP = "offline (the default), openai:MODEL, anthropic:MODEL, human[:FILE], replay:SESSION"
CRITIC_HELP = "rule (default), openai:MODEL or anthropic:MODEL (falls back to the rules when the model fails)"


@dataclass(frozen=True)
class ModelRequest:
    """What a builder may need besides the model name."""

    problem: Problem
    session_dir: Path  # the session's directory (the human generator's default file lives there)
    backend: str  # "triton" or "cuda"
    base_url: str | None = None  # an OpenAI-compatible server
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    price_file: Path | None = None  # the user's extra price table ([prices] file in the settings)


def _human(argument: str, request: ModelRequest) -> Generator:
    from openkernel.generate.human import HumanGenerator

    return HumanGenerator(Path(argument) if argument else request.session_dir / "candidate.py")


def _llm(provider: str) -> Callable[[str, ModelRequest], Generator]:
    def build(argument: str, request: ModelRequest) -> Generator:
        from openkernel.generate.llm import LLMConfig, LLMGenerator, resolve_key

        if not argument:
            raise ConfigError(f"--model {provider}: name the model, as in --model {provider}:MODEL")
        from openkernel.generate.pricing import load_prices

        config = LLMConfig(provider=provider, model=argument, base_url=request.base_url)
        prices = load_prices(request.price_file) if request.price_file is not None else None
        return LLMGenerator(config, resolve_key(config, dict(request.env)), prices)

    return build


def _replay(argument: str, request: ModelRequest) -> Generator:
    from openkernel.generate.replay import ReplayGenerator, find_session
    from openkernel.settings import load_settings

    if not argument:
        raise ConfigError("--model replay: name the session, as in --model replay:SESSION (a directory or an id)")
    generator = ReplayGenerator(find_session(argument, load_settings().sessions.home))
    generator.check_fits(request.problem.name, request.backend)
    return generator


def _offline(argument: str, request: ModelRequest) -> Generator:
    from openkernel.generate.offline import OfflineGenerator

    if argument:
        raise ConfigError(f"--model offline takes no argument (got offline:{argument}): pass --model offline")
    return OfflineGenerator()


# kind -> builder(argument after the colon, request)
_BUILDERS: dict[str, Callable[[str, ModelRequest], Generator]] = {
    "offline": _offline,
    "human": _human,
    "openai": _llm("openai"),
    "anthropic": _llm("anthropic"),
    "replay": _replay,
}


def make_critic(name: str, base_url: str | None, env: Mapping[str, str]) -> Critic:
    """The critic ``--critic`` names: the rule-based one, or an LLM critic on top of it."""
    if name == "rule":
        return RuleCritic()
    provider, _, model = name.partition(":")
    if provider not in ("openai", "anthropic") or not model:
        raise ConfigError(f"unknown critic {name!r}: use {CRITIC_HELP}")
    from openkernel.critic.llm import LLMCritic
    from openkernel.generate.client import LLMConfig, resolve_key

    config = LLMConfig(provider=provider, model=model, base_url=base_url)
    return LLMCritic(config, resolve_key(config, env))


def make_generator(model: str, request: ModelRequest) -> Generator:
    """The generator ``model`` names; a ConfigError that lists the choices for an unknown one."""
    kind, _, argument = model.partition(":")
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise ConfigError(f"unknown model {model!r}: use one of {MODEL_HELP}")
    return builder(argument, request)
