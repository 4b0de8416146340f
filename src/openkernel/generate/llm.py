"""The LLM generator: prompt files in, a streamed reply through the official SDK, a checked candidate out.

Two providers, each through its own official SDK: ``openai`` (OpenAI and any OpenAI-compatible
endpoint such as vLLM, Ollama or OpenRouter, chosen by ``base_url``) and ``anthropic``.

Retries are ours, not the SDKs' (they are built with ``max_retries=0``): both SDKs honour
``Retry-After``, but the anthropic SDK waits as long as the server asks (an hour, if it says so) and
both also retry timeouts, which would stretch one proposal to several times ``timeout_s``. Here
429, 5xx, error events in the stream and dropped connections are retried with exponential backoff,
``Retry-After`` is honoured up to ``max_retry_after_s``, and a reply that does not finish within
``timeout_s`` is a failed proposal straight away.

A bad key or an unknown model raises :class:`ConfigError` (the user must act); everything else that
goes wrong (timeouts, exhausted retries, malformed streams, replies without a usable kernel) is a
:class:`Proposal` with ``source=None`` and an ``error``. The API key is never logged, never put in an
exception or a proposal: any text that could echo it is redacted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from string import Template

import anthropic
import httpx2
import openai

from openkernel.errors import ConfigError
from openkernel.generate.base import Context, Generator, Proposal, Usage
from openkernel.generate.extract import extract_candidate
from openkernel.generate.pricing import Price, cost_usd, price_for

__all__ = [
    "DEFAULT_KEY_ENV",
    "PROMPT_VERSION",
    "PROVIDERS",
    "LLMConfig",
    "LLMGenerator",
    "render_prompt",
    "resolve_key",
]

PROMPT_VERSION = "1"  # bump when prompts/system.md or prompts/iteration.md change meaning
PROVIDERS = ("openai", "anthropic")
DEFAULT_KEY_ENV: Mapping[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_ENDPOINT: Mapping[str, str] = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
MAX_BACKOFF_S = 8.0  # the longest wait between retries when the server does not say how long
REDACTED = "[redacted]"

_TIMEOUT_ERRORS = (openai.APITimeoutError, anthropic.APITimeoutError)
_CONNECTION_ERRORS = (openai.APIConnectionError, anthropic.APIConnectionError)
_STATUS_ERRORS = (openai.APIStatusError, anthropic.APIStatusError)
_API_ERRORS = (openai.APIError, anthropic.APIError)
# What the SDKs raise on a stream they cannot parse (bad JSON, events out of order, missing fields).
_MALFORMED_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RuntimeError, AssertionError)


@dataclass(frozen=True)
class LLMConfig:
    provider: str  # "openai" (and OpenAI-compatible endpoints) or "anthropic"
    model: str
    base_url: str | None = None  # None: the provider's own API
    api_key_env: str | None = None  # the environment variable holding the key; None: DEFAULT_KEY_ENV[provider]
    timeout_s: float = 600.0  # the longest one reply may take, first byte to last
    max_retries: int = 3  # further attempts after a 429, a 5xx or a dropped connection
    max_tokens: int = 16384  # the reply's length limit, in tokens
    temperature: float | None = None  # None: the provider's default (some reasoning models accept no other)
    retry_base_delay_s: float = 0.5  # the first backoff; doubles per retry up to MAX_BACKOFF_S
    max_retry_after_s: float = 60.0  # the longest Retry-After we honour; longer requests wait this long

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigError(f"unknown LLM provider {self.provider!r}: use one of {', '.join(PROVIDERS)}")
        if not self.model:
            raise ConfigError("no model name given: pass --model <provider>:<model>, e.g. anthropic:claude-sonnet-4-5")
        if not self.timeout_s > 0 or self.max_tokens <= 0 or self.max_retries < 0:
            raise ConfigError("LLM timeout_s and max_tokens must be > 0 and max_retries >= 0: fix them in the config")

    @property
    def key_env(self) -> str:
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_ENDPOINT[self.provider]


def resolve_key(config: LLMConfig, environ: Mapping[str, str], config_file_key: str | None = None) -> str:
    """The API key: the environment variable first, then the config file's key."""
    for candidate in (environ.get(config.key_env), config_file_key):
        if candidate is not None and candidate.strip():
            return candidate.strip()
    raise ConfigError(f"No key found - set {config.key_env} or pass --model offline")


def render_prompt(context: Context) -> tuple[str, str]:
    """The system prompt and the user prompt for ``context``, from the prompt files in the package."""
    return _prompt_file("system.md").strip(), _render_iteration(context)


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


@dataclass(frozen=True)
class _Reply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None


class _DeadlineExceeded(Exception):
    def __init__(self, text: str) -> None:
        super().__init__("deadline exceeded")
        self.text = text  # what had arrived by then


class _Retryable(Exception):
    def __init__(self, reason: str, response: httpx2.Response | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response


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
        self._key = api_key
        self._price = price_for(config.model, prices)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"LLMGenerator({self.config!r})"  # never the key

    def propose(self, context: Context, on_text: Callable[[str], None] | None = None) -> Proposal:
        system, user = render_prompt(context)
        emit = on_text or (lambda _text: None)
        cfg = self.config
        reason = ""
        for attempt in range(cfg.max_retries + 1):
            try:
                reply = self._attempt(system, user, emit)
            except _Retryable as err:
                reason = err.reason
                if attempt < cfg.max_retries:
                    self._sleep(self._delay_s(attempt, err.response))
                continue
            except _DeadlineExceeded as err:
                return self._failed(
                    f"no complete reply from {cfg.endpoint} within timeout_s={cfg.timeout_s:g}", err.text
                )
            except _Failed as err:
                return self._failed(str(err), "")
            except _MALFORMED_ERRORS as err:
                return self._failed(f"malformed stream from {cfg.endpoint}: {type(err).__name__}: {err}", "")
            return self._proposal(reply)
        return self._failed(f"gave up after {cfg.max_retries + 1} attempts to {cfg.endpoint}: {reason}", "")

    def _attempt(self, system: str, user: str, emit: Callable[[str], None]) -> _Reply:
        """One streamed request, with the SDKs' errors sorted into: retry, user error, failed proposal."""
        cfg = self.config
        try:
            if cfg.provider == "openai":
                return self._stream_openai(system, user, emit)
            return self._stream_anthropic(system, user, emit)
        except _TIMEOUT_ERRORS:
            raise _DeadlineExceeded("") from None
        except _CONNECTION_ERRORS as err:
            raise _Retryable(f"connection failed ({self._redact(str(err))})", None) from None
        except _STATUS_ERRORS as err:
            code = err.status_code
            if code in (401, 403):
                raise ConfigError(
                    f"the API key was refused by {cfg.endpoint} (HTTP {code}): check {cfg.key_env}"
                ) from None
            if code == 404:
                raise ConfigError(
                    f"model {cfg.model!r} not found at {cfg.endpoint} (HTTP 404): check the model name "
                    f"(and base_url for an OpenAI-compatible server)"
                ) from None
            if code == 429 or code >= 500 or code == 200:  # 200: an error event inside the stream (e.g. overloaded)
                raise _Retryable(f"HTTP {code}: {self._redact(_server_message(err))}", err.response) from None
            raise _Failed(
                self._redact(f"{cfg.endpoint} refused the request (HTTP {code}): {_server_message(err)}")
            ) from None
        except _API_ERRORS as err:  # openai: an error event inside the stream
            raise _Retryable(f"error in the stream: {self._redact(_server_message(err))}", None) from None

    def _stream_openai(self, system: str, user: str, emit: Callable[[str], None]) -> _Reply:
        cfg = self.config
        deadline = time.monotonic() + cfg.timeout_s
        # The official API wants max_completion_tokens (reasoning models refuse max_tokens); compatible
        # servers (vLLM, Ollama, ...) have long understood max_tokens.
        official = cfg.base_url is None
        parts: list[str] = []
        usage: tuple[int, int] | None = None
        with openai.OpenAI(api_key=self._key, base_url=cfg.base_url, max_retries=0, timeout=cfg.timeout_s) as client:
            stream = client.chat.completions.create(
                model=cfg.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                stream=True,
                stream_options={"include_usage": True},
                temperature=openai.omit if cfg.temperature is None else cfg.temperature,
                max_completion_tokens=cfg.max_tokens if official else openai.omit,
                max_tokens=openai.omit if official else cfg.max_tokens,
            )
            with stream:
                for chunk in stream:
                    if chunk.usage is not None:
                        usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                    for choice in chunk.choices:
                        if choice.delta.content:
                            parts.append(choice.delta.content)
                            emit(choice.delta.content)
                    if time.monotonic() > deadline:
                        raise _DeadlineExceeded("".join(parts))
        if not parts:
            raise ValueError("the stream ended without any text")
        return _Reply("".join(parts), *(usage or (None, None)))

    def _stream_anthropic(self, system: str, user: str, emit: Callable[[str], None]) -> _Reply:
        cfg = self.config
        deadline = time.monotonic() + cfg.timeout_s
        parts: list[str] = []
        with (
            anthropic.Anthropic(
                api_key=self._key, base_url=cfg.base_url, max_retries=0, timeout=cfg.timeout_s
            ) as client,
            client.messages.stream(
                model=cfg.model,
                max_tokens=cfg.max_tokens,
                system=system,
                messages=[{"role": "user", "content": user}],
                # This SDK version has no temperature argument; the Messages API still accepts one.
                extra_body=None if cfg.temperature is None else {"temperature": cfg.temperature},
            ) as stream,
        ):
            for text in stream.text_stream:
                parts.append(text)
                emit(text)
                if time.monotonic() > deadline:
                    raise _DeadlineExceeded("".join(parts))
            final = stream.get_final_message()
        return _Reply("".join(parts), final.usage.input_tokens, final.usage.output_tokens)

    def _delay_s(self, attempt: int, response: httpx2.Response | None) -> float:
        cfg = self.config
        asked = _retry_after_s(response.headers) if response is not None else None
        if asked is not None:
            return min(asked, cfg.max_retry_after_s)
        return min(cfg.retry_base_delay_s * 2.0**attempt, MAX_BACKOFF_S)

    def _proposal(self, reply: _Reply) -> Proposal:
        text = self._redact(reply.text)
        extracted = extract_candidate(text)
        usage = None
        if reply.prompt_tokens is not None and reply.completion_tokens is not None:
            cost = None if self._price is None else cost_usd(reply.prompt_tokens, reply.completion_tokens, self._price)
            usage = Usage(reply.prompt_tokens, reply.completion_tokens, cost)
        return Proposal(extracted.source, extracted.intent, text, usage, extracted.error)

    def _failed(self, error: str, text: str) -> Proposal:
        return Proposal(source=None, intent="", text=self._redact(text), usage=None, error=self._redact(error))

    def _redact(self, text: str) -> str:
        return text.replace(self._key, REDACTED) if self._key else text


class _Failed(Exception):
    """A request the server refused for a reason that retrying will not fix (HTTP 400, 413, 422, ...)."""


def _server_message(err: openai.APIError | anthropic.APIError) -> str:
    """The server's own words: OpenAI's body is the error object, Anthropic's wraps it in "error"."""
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return err.message


def _retry_after_s(headers: httpx2.Headers) -> float | None:
    """The server's Retry-After (or the non-standard retry-after-ms), in seconds; None when absent or unreadable."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                seconds = float(value) / divisor
            except ValueError:
                continue
            if seconds >= 0:
                return seconds
    return None
