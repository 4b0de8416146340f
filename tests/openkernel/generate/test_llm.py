"""The LLM path end to end: real local HTTP servers speaking each provider's wire protocol, driven
through the official SDKs (openai, anthropic) by LLMGenerator."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from openkernel.errors import ConfigError
from openkernel.generate.base import Context, PastResult, Proposal, Usage
from openkernel.generate.extract import NO_CODE_BLOCK
from openkernel.generate.llm import LLMConfig, LLMGenerator, full_prompt, render_prompt, resolve_key
from openkernel.generate.pricing import Price
from tests.llm_fakes import FakeServer, Step, anthropic_events, error_body, openai_events, silent, sse, status

KEY = "sk-canary-7f3a9c1e"  # must never show up in an exception or a proposal
GOOD_SOURCE = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
GOOD_DELTAS = ["Intent: fuse the softmax\n", "```python\n", GOOD_SOURCE, "```\n"]
CONTEXT = Context(
    iteration=3,
    problem_name="softmax",
    problem_source="class Model:\n    pass\n",
    backend="triton",
    best_source=None,
    best_speedup=None,
    history=(PastResult(2, "tile rows", "wrong_answer", None, ("max abs error 0.5",)),),
    diagnosis=None,
    skills=None,
    hints=("use fp32 accumulators",),
    last_error=None,
)


@pytest.fixture
def serve() -> Iterator[Callable[..., FakeServer]]:
    servers: list[FakeServer] = []

    def start(*steps: Step) -> FakeServer:
        server = FakeServer(list(steps))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@dataclass(frozen=True)
class Provider:
    name: str
    model: str
    events: Callable[..., list[str]]
    path: str  # where the SDK posts
    cost_usd: float  # 1000 prompt and 500 completion tokens at the built-in price

    def base_url(self, server: FakeServer) -> str:
        return server.root + ("/v1" if self.name == "openai" else "")


OPENAI = Provider("openai", "gpt-4o", openai_events, "/v1/chat/completions", 0.0075)  # the built-in price
# A name of our own, priced by the user's table: the anthropic SDK warns (DeprecationWarning) on real names it
# has marked deprecated, and that list grows with each SDK release.
ANTHROPIC = Provider("anthropic", "claude-test-1", anthropic_events, "/v1/messages", 0.0105)
USER_PRICES = {"claude-test-1": Price(3.0, 15.0)}


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    p: Provider = request.param
    return p


def generator(
    provider: Provider, server: FakeServer, sleeps: list[float] | None = None, **overrides: Any
) -> LLMGenerator:
    settings: dict[str, Any] = {"timeout_s": 5.0, "max_retries": 2, "retry_base_delay_s": 0.01, "max_tokens": 4096}
    config = LLMConfig(provider.name, provider.model, base_url=provider.base_url(server), **(settings | overrides))

    def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)
        time.sleep(seconds)

    return LLMGenerator(config, KEY, prices=USER_PRICES, sleep=sleep)


PROMPT = full_prompt(*render_prompt(CONTEXT))  # what every proposal records: the system and user prompt sent
GOOD = Proposal(
    source=GOOD_SOURCE, intent="fuse the softmax", text="".join(GOOD_DELTAS), usage=None, error=None
)  # usage filled per provider


# --- good replies ------------------------------------------------------------------------------


def test_good_reply_streams_deltas_and_counts_cost(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(sse(provider.events(GOOD_DELTAS)))
    seen: list[str] = []
    proposal = generator(provider, server).propose(CONTEXT, seen.append)
    assert proposal == Proposal(GOOD.source, GOOD.intent, GOOD.text, Usage(1000, 500, provider.cost_usd), None, PROMPT)
    assert seen == GOOD_DELTAS
    system, user = render_prompt(CONTEXT)
    (path, headers, body), *_ = server.requests
    assert (path, len(server.requests), headers["authorization"]) == (provider.path, 1, f"Bearer {KEY}")
    if provider is OPENAI:
        assert body == {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 4096,
        }
    else:
        assert body == {
            "model": "claude-test-1",
            "max_tokens": 4096,
            "system": system,
            "messages": [{"role": "user", "content": user}],
            "stream": True,
        }


def test_reply_without_code_is_a_recorded_error(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(sse(provider.events(["I would fuse the softmax. ", "Shall I?"])))
    proposal = generator(provider, server).propose(CONTEXT)
    text = "I would fuse the softmax. Shall I?"
    assert proposal == Proposal(
        None, "I would fuse the softmax.", text, Usage(1000, 500, provider.cost_usd), NO_CODE_BLOCK, PROMPT
    )


def test_an_echoed_key_is_redacted_from_the_proposal(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(sse(provider.events([f"Intent: leak {KEY}\n", "no code"])))
    proposal = generator(provider, server).propose(CONTEXT)
    text = "Intent: leak [redacted]\nno code"
    assert proposal == Proposal(
        None, "leak [redacted]", text, Usage(1000, 500, provider.cost_usd), NO_CODE_BLOCK, PROMPT
    )


# --- retries -----------------------------------------------------------------------------------


def test_429_waits_for_retry_after_then_succeeds(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    limited = status(429, error_body(provider.name, "rate_limit_error", "slow down"), {"Retry-After": "1"})
    server = serve(limited, sse(provider.events(GOOD_DELTAS)))
    sleeps: list[float] = []
    started = time.monotonic()
    proposal = generator(provider, server, sleeps).propose(CONTEXT)
    assert proposal == Proposal(GOOD.source, GOOD.intent, GOOD.text, Usage(1000, 500, provider.cost_usd), None, PROMPT)
    assert (len(server.requests), sleeps) == (2, [1.0])
    assert time.monotonic() - started >= 1.0


def test_retry_after_is_capped(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    limited = status(429, error_body(provider.name, "rate_limit_error", "slow down"), {"Retry-After": "3600"})
    server = serve(limited, sse(provider.events(GOOD_DELTAS)))
    sleeps: list[float] = []
    proposal = generator(provider, server, sleeps, max_retry_after_s=0.05).propose(CONTEXT)
    assert (proposal.error, len(server.requests), sleeps) == (None, 2, [0.05])


def test_500_then_success(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(500, error_body(provider.name, "api_error", "boom")), sse(provider.events(GOOD_DELTAS)))
    sleeps: list[float] = []
    proposal = generator(provider, server, sleeps).propose(CONTEXT)
    assert proposal == Proposal(GOOD.source, GOOD.intent, GOOD.text, Usage(1000, 500, provider.cost_usd), None, PROMPT)
    assert (len(server.requests), sleeps) == (2, [0.01])


def test_500_forever_gives_up_after_max_retries(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(500, error_body(provider.name, "api_error", "boom")))
    sleeps: list[float] = []
    proposal = generator(provider, server, sleeps).propose(CONTEXT)
    error = f"gave up after 3 attempts to {provider.base_url(server)}: HTTP 500: boom"
    assert proposal == Proposal(None, "", "", None, error, PROMPT)
    assert (len(server.requests), sleeps) == (3, [0.01, 0.02])


# --- failures that are data --------------------------------------------------------------------


def test_malformed_stream_is_a_recorded_error(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    events = provider.events(GOOD_DELTAS)
    events.insert(
        2, "event: content_block_delta\ndata: {not json\n\n" if provider is ANTHROPIC else "data: {not json\n\n"
    )
    server = serve(sse(events))
    proposal = generator(provider, server).propose(CONTEXT)
    error = (
        f"malformed stream from {provider.base_url(server)}: JSONDecodeError: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    assert proposal == Proposal(None, "", "", None, error, PROMPT)
    assert len(server.requests) == 1


def test_silent_server_times_out(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(silent(30.0))
    started = time.monotonic()
    proposal = generator(provider, server, timeout_s=0.5).propose(CONTEXT)
    error = f"no complete reply from {provider.base_url(server)} within timeout_s=0.5"
    assert proposal == Proposal(None, "", "", None, error, PROMPT)
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 1  # a timeout is not retried: it would multiply the wait


def test_trickling_reply_past_the_timeout_stops_at_the_deadline(
    provider: Provider, serve: Callable[..., FakeServer]
) -> None:
    deltas = [f"word{i} " for i in range(100)]
    server = serve(sse(provider.events(deltas), gap_s=0.1))
    started = time.monotonic()
    proposal = generator(provider, server, timeout_s=0.5).propose(CONTEXT)
    assert proposal.error == f"no complete reply from {provider.base_url(server)} within timeout_s=0.5"
    assert (proposal.source, proposal.usage) == (None, None)
    assert proposal.text.startswith("word0 word1 ")
    assert time.monotonic() - started < 3.0


# --- user errors -------------------------------------------------------------------------------


def test_refused_key_is_a_config_error_without_the_key(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(401, error_body(provider.name, "authentication_error", f"Incorrect API key: {KEY}")))
    with pytest.raises(ConfigError) as caught:
        generator(provider, server).propose(CONTEXT)
    env = "OPENAI_API_KEY" if provider is OPENAI else "ANTHROPIC_API_KEY"
    assert str(caught.value) == f"the API key was refused by {provider.base_url(server)} (HTTP 401): check {env}"
    assert KEY not in "".join(traceback.format_exception(caught.value))
    assert len(server.requests) == 1


def test_unknown_model_is_a_config_error(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(404, error_body(provider.name, "not_found_error", f"model: {provider.model}")))
    with pytest.raises(ConfigError) as caught:
        generator(provider, server).propose(CONTEXT)
    assert str(caught.value) == (
        f"model {provider.model!r} not found at {provider.base_url(server)} (HTTP 404): "
        "check the model name (and base_url for an OpenAI-compatible server)"
    )


def test_other_4xx_is_a_recorded_error_not_retried(provider: Provider, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(400, error_body(provider.name, "invalid_request_error", "prompt is too long")))
    proposal = generator(provider, server).propose(CONTEXT)
    error = f"{provider.base_url(server)} refused the request (HTTP 400): prompt is too long"
    assert proposal == Proposal(None, "", "", None, error, PROMPT)
    assert len(server.requests) == 1


# --- keys and prompts --------------------------------------------------------------------------


def test_resolve_key_prefers_the_environment() -> None:
    config = LLMConfig("anthropic", "claude-sonnet-4-5")
    assert resolve_key(config, {"ANTHROPIC_API_KEY": "env-key"}, "file-key") == "env-key"
    assert resolve_key(config, {"ANTHROPIC_API_KEY": "  "}, "file-key") == "file-key"
    custom = LLMConfig("openai", "llama3", base_url="http://127.0.0.1:11434/v1", api_key_env="OLLAMA_KEY")
    assert resolve_key(custom, {"OLLAMA_KEY": "k", "OPENAI_API_KEY": "other"}) == "k"


def test_resolve_key_says_how_to_fix_a_missing_key() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_key(LLMConfig("anthropic", "claude-sonnet-4-5"), {}, None)
    assert str(caught.value) == "No key found - set ANTHROPIC_API_KEY or pass --model offline"


def test_bad_config_values_are_config_errors() -> None:
    with pytest.raises(ConfigError) as caught:
        LLMConfig("gemini", "x")
    assert str(caught.value) == "unknown LLM provider 'gemini': use one of openai, anthropic"


def test_generator_name_and_repr_hide_the_key() -> None:
    gen = LLMGenerator(LLMConfig("openai", "gpt-4o"), KEY)
    assert gen.name == "openai:gpt-4o"
    assert KEY not in repr(gen)


def test_prompt_carries_the_context() -> None:
    context = Context(
        iteration=4,
        problem_name="softmax",
        problem_source="class Model:\n    pass\n",
        backend="cuda",
        best_source="class ModelNew:\n    pass\n",
        best_speedup=1.5,
        history=(
            PastResult(3, "vectorise loads", "correct", 1.5, ()),
            PastResult(4, None, "compile_error", None, ("x",)),
        ),
        diagnosis="memory bound",
        skills="1. Online softmax",
        hints=("try warp shuffles",),
        last_error=NO_CODE_BLOCK,
    )
    system, user = render_prompt(context)
    assert system.startswith("You are a GPU kernel engineer.")
    assert user == EXPECTED_USER_PROMPT


EXPECTED_USER_PROMPT = """\
# Iteration 4: softmax

Backend: cuda. Write the kernels in cuda.

## The reference problem

```python
class Model:
    pass
```

## The best kernel so far (1.50x the reference)

```python
class ModelNew:
    pass
```

## Recent attempts (oldest first)

- iteration 3: vectorise loads -> correct, 1.50x
- iteration 4: (no intent) -> compile_error
  - x

## Profiler diagnosis

memory bound

## Techniques that may apply

1. Online softmax

## Hints from the person steering (newest last; follow them)

- try warp shuffles

## Your previous reply could not be used

no code block: reply with exactly one ```python fenced block holding the whole candidate file

Fix this in this reply.

## Your turn

Propose the next candidate: one optimisation at a time, aimed at what limits the best kernel now.
If recent attempts failed, fix what the evaluator reported before trying anything new.
Reply with the first line `Intent: <a few words>`, then exactly one ```python fenced block holding
the whole candidate file defining `class ModelNew`.
"""
