"""The LLM generator: prompt files in, a streamed reply through the official SDK, a checked candidate out.

The call itself (the two providers' official SDKs, streaming, retries, timeouts, key redaction) is
:class:`openkernel.generate.client.LLMClient`, shared with the LLM critic. Here: the prompts, and
the reply turned into a :class:`Proposal`.

A bad key or an unknown model raises :class:`ConfigError` (the user must act); everything else that
goes wrong (timeouts, exhausted retries, malformed streams, replies without a usable kernel) is a
:class:`Proposal` with ``source=None`` and an ``error``. The API key is never logged, never put in an
exception or a proposal: any text that could echo it is redacted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from importlib import resources
from string import Template

from openkernel.generate.base import Context, Generator, Proposal, Usage
from openkernel.generate.client import DEFAULT_KEY_ENV, PROVIDERS, LLMClient, LLMConfig, LLMFailure, Reply, resolve_key
from openkernel.generate.extract import extract_candidate
from openkernel.generate.pricing import Price, cost_usd, price_for

__all__ = [
    "DEFAULT_KEY_ENV",
    "PROMPT_VERSION",
    "PROVIDERS",
    "LLMConfig",
    "LLMGenerator",
    "full_prompt",
    "render_prompt",
    "resolve_key",
]

PROMPT_VERSION = "1"  # bump when prompts/system.md or prompts/iteration.md change meaning


def render_prompt(context: Context) -> tuple[str, str]:
    """The system prompt and the user prompt for ``context``, from the prompt files in the package."""
    return _prompt_file("system.md").strip(), _render_iteration(context)


def full_prompt(system: str, user: str) -> str:
    """The whole prompt as one text (recorded in the session and the traces), each part in a role tag."""
    return f"<system>\n{system.strip()}\n</system>\n\n<user>\n{user.strip()}\n</user>\n"


def _prompt_file(name: str) -> str:
    return resources.files("openkernel.generate").joinpath("prompts", name).read_text(encoding="utf-8")


def _render_iteration(context: Context) -> str:
    if context.best_source is None:
        best = (
            "## The best kernel so far\n\nNone yet: no candidate has been correct. Start with a simple, correct kernel."
        )
    else:
        speed = "" if context.best_speedup is None else f" ({context.best_speedup:.2f}x the reference)"
        best = f"## The best kernel so far{speed}\n\n```python\n{context.best_source.rstrip()}\n```"
    history = ""
    if context.history:
        lines = ["## Recent attempts (oldest first)", ""]
        for past in context.history:
            speedup = "" if past.speedup is None else f", {past.speedup:.2f}x"
            lines.append(f"- iteration {past.iteration}: {past.intent or '(no intent)'} -> {past.status}{speedup}")
            lines.extend(f"  - {reason}" for reason in past.reasons)
        history = "\n".join(lines)
    sections = {
        "iteration": str(context.iteration),
        "problem_name": context.problem_name,
        "backend": context.backend,
        "problem_source": context.problem_source.rstrip(),
        "best_section": best,
        "history_section": history,
        "diagnosis_section": f"## Profiler diagnosis\n\n{context.diagnosis}" if context.diagnosis else "",
        "skills_section": f"## Techniques that may apply\n\n{context.skills}" if context.skills else "",
        "hints_section": (
            "## Hints from the person steering (newest last; follow them)\n\n"
            + "\n".join(f"- {h}" for h in context.hints)
            if context.hints
            else ""
        ),
        "last_error_section": (
            f"## Your previous reply could not be used\n\n{context.last_error}\n\nFix this in this reply."
            if context.last_error
            else ""
        ),
    }
    text = Template(_prompt_file("iteration.md")).substitute(sections)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip() + "\n"


class LLMGenerator(Generator):
    """Proposes kernels with an LLM through the provider's official SDK, streaming the reply."""

    def __init__(
        self,
        config: LLMConfig,
        api_key: str,
        prices: Mapping[str, Price] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.name = f"{config.provider}:{config.model}"
        self._client = LLMClient(config, api_key, sleep)
        self._price = price_for(config.model, prices)

    def __repr__(self) -> str:
        return f"LLMGenerator({self.config!r})"  # never the key

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        system, user = render_prompt(context)
        prompt = full_prompt(system, user)
        try:
            reply = self._client.complete(system, user, on_text)
        except LLMFailure as err:
            return Proposal(source=None, intent="", text=err.text, usage=None, error=str(err), prompt=prompt)
        return self._proposal(reply, prompt)

    def _proposal(self, reply: Reply, prompt: str) -> Proposal:
        extracted = extract_candidate(reply.text)
        usage = None
        if reply.prompt_tokens is not None and reply.completion_tokens is not None:
            cost = None if self._price is None else cost_usd(reply.prompt_tokens, reply.completion_tokens, self._price)
            usage = Usage(reply.prompt_tokens, reply.completion_tokens, cost)
        return Proposal(extracted.source, extracted.intent, reply.text, usage, extracted.error, prompt)
