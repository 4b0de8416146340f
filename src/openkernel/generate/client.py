"""One streamed LLM call through a provider's official SDK, with our retries: shared by the generator and the critic.

Two providers, each through its own official SDK: ``openai`` (OpenAI and any OpenAI-compatible
endpoint such as vLLM, Ollama or OpenRouter, chosen by ``base_url``) and ``anthropic``.

Retries are ours, not the SDKs' (they are built with ``max_retries=0``): both SDKs honour
``Retry-After``, but the anthropic SDK waits as long as the server asks (an hour, if it says so) and
both also retry timeouts, which would stretch one call to several times ``timeout_s``. Here 429,
5xx, error events in the stream and dropped connections are retried with exponential backoff,
``Retry-After`` is honoured up to ``max_retry_after_s``, and a reply that does not finish within
``timeout_s`` fails straight away.

:meth:`LLMClient.complete` returns the reply or raises :class:`LLMFailure` (timeouts, exhausted
retries, malformed streams, refused requests: the caller records these as data); a bad key or an
unknown model raises :class:`ConfigError` (the user must act). The API key is never logged, never
put in an exception or a reply: any text that could echo it is redacted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anthropic
import httpx2
import openai

from openkernel.errors import ConfigError

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_KEY_ENV",
    "MAX_BACKOFF_S",
    "PROVIDERS",
    "REDACTED",
    "LLMClient",
    "LLMConfig",
    "LLMFailure",
    "Reply",
    "resolve_key",
]

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


@dataclass(frozen=True)
class Reply:
    text: str  # the whole reply, key redacted
    prompt_tokens: int | None  # None: the server did not say
    completion_tokens: int | None


class LLMFailure(Exception):
    """No usable reply: ``str(err)`` says why (key redacted); ``text`` is what had arrived by then."""

    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(reason)
        self.text = text


class _DeadlineExceeded(Exception):
    def __init__(self, text: str) -> None:
        super().__init__("deadline exceeded")
        self.text = text  # what had arrived by then


class _Retryable(Exception):
    def __init__(self, reason: str, response: httpx2.Response | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response


class _Refused(Exception):
    """A request the server refused for a reason that retrying will not fix (HTTP 400, 413, 422, ...)."""


class LLMClient:
    """Streams one reply per :meth:`complete` from ``config``'s provider, retrying what is worth retrying."""

    def __init__(self, config: LLMConfig, api_key: str, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._key = api_key
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"LLMClient({self.config!r})"  # never the key

    def complete(self, system: str, user: str, on_text: Callable[[str], None] | None = None) -> Reply:
        """The reply to ``system`` + ``user``, streamed to ``on_text``; :class:`LLMFailure` when there is none."""
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
                raise LLMFailure(
                    f"no complete reply from {cfg.endpoint} within timeout_s={cfg.timeout_s:g}", self.redact(err.text)
                ) from None
            except _Refused as err:
                raise LLMFailure(self.redact(str(err))) from None
            except _MALFORMED_ERRORS as err:
                raise LLMFailure(
                    self.redact(f"malformed stream from {cfg.endpoint}: {type(err).__name__}: {err}")
                ) from None
            return Reply(self.redact(reply.text), reply.prompt_tokens, reply.completion_tokens)
        raise LLMFailure(self.redact(f"gave up after {cfg.max_retries + 1} attempts to {cfg.endpoint}: {reason}"))

    def redact(self, text: str) -> str:
        return text.replace(self._key, REDACTED) if self._key else text

    def _attempt(self, system: str, user: str, emit: Callable[[str], None]) -> Reply:
        """One streamed request, with the SDKs' errors sorted into: retry, user error, failure."""
        cfg = self.config
        try:
            if cfg.provider == "openai":
                return self._stream_openai(system, user, emit)
            return self._stream_anthropic(system, user, emit)
        except _TIMEOUT_ERRORS:
            raise _DeadlineExceeded("") from None
        except _CONNECTION_ERRORS as err:
            raise _Retryable(f"connection failed ({self.redact(str(err))})", None) from None
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
                raise _Retryable(f"HTTP {code}: {self.redact(_server_message(err))}", err.response) from None
            raise _Refused(
                self.redact(f"{cfg.endpoint} refused the request (HTTP {code}): {_server_message(err)}")
            ) from None
        except _API_ERRORS as err:  # openai: an error event inside the stream
            raise _Retryable(f"error in the stream: {self.redact(_server_message(err))}", None) from None

    def _stream_openai(self, system: str, user: str, emit: Callable[[str], None]) -> Reply:
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
        return Reply("".join(parts), *(usage or (None, None)))

    def _stream_anthropic(self, system: str, user: str, emit: Callable[[str], None]) -> Reply:
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
        return Reply("".join(parts), final.usage.input_tokens, final.usage.output_tokens)

    def _delay_s(self, attempt: int, response: httpx2.Response | None) -> float:
        cfg = self.config
        asked = _retry_after_s(response.headers) if response is not None else None
        if asked is not None:
            return min(asked, cfg.max_retry_after_s)
        return min(cfg.retry_base_delay_s * 2.0**attempt, MAX_BACKOFF_S)


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
