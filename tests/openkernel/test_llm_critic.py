"""The LLM critic through the official SDKs against local servers speaking each provider's wire protocol:
a good answer becomes the diagnosis' advice; anything else falls back to the rule critic, saying why."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openkernel.critic import Diagnosis, KernelMetrics, NextStep, RuleCritic, Snapshot
from openkernel.critic.llm import LLMCritic, render_critic_prompt
from openkernel.generate.client import LLMConfig
from openkernel.hardware import Ceilings, ComputeCeiling
from openkernel.profile import FlopCount, FlopRule, analyse
from tests.llm_fakes import FakeServer, Step, anthropic_events, error_body, openai_events, silent, sse, status

KEY = "sk-canary-critic-5b2d"  # must never show up in a diagnosis
H200 = Ceilings("H200", 4.8e12, "datasheet", (ComputeCeiling("fp32", 67e12, "datasheet"),))
SOFTMAX_FLOPS = FlopCount(300_000_000, (FlopRule("softmax", "aten._softmax", 300_000_000),), "float32")
# A softmax at 72% of the H200's bandwidth (0.1 ms speed of light, 0.139 ms measured): memory bound.
PROFILED = Snapshot(
    iteration=3,
    status="correct",
    runtime_ms=0.139,
    speedup=1.8,
    roofline=analyse(SOFTMAX_FLOPS, 480_000_000, None, H200, 0.139),
    kernels=(KernelMetrics(name="softmax_kernel", l2_hit_rate_pct=45.0, registers_per_thread=40, launches=2),),
    intent="one row per program",
    reasons=("all checks passed",),
)
FAILED = Snapshot(4, "incorrect", None, None, None, (), "vectorise loads", ("max abs error 0.5 at [3, 17]",))
OPS = ("softmax",)

ANSWER = {
    "bottleneck": "memory_bound",
    "summary": "Two launches read the input twice, so the kernel moves twice the bytes it must.",
    "next_steps": [
        {"title": "Fuse the two passes", "why": "2 launches per forward", "expected_effect": "about 1.4x"},
        {"title": "Keep rows in registers", "why": "L2 hit rate 45%", "expected_effect": "fewer DRAM reads"},
    ],
}
ADVICE = (
    NextStep("Fuse the two passes", "2 launches per forward", (), "about 1.4x", 1, True),
    NextStep("Keep rows in registers", "L2 hit rate 45%", (), "fewer DRAM reads", 2, True),
)
LEAD = "Two launches read the input twice, so the kernel moves twice the bytes it must"


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


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _reply(provider: str, text: str) -> Step:
    events = openai_events if provider == "openai" else anthropic_events
    return sse(events([text[: len(text) // 2], text[len(text) // 2 :]]))


def _critic(provider: str, server: FakeServer, **overrides: Any) -> LLMCritic:
    model = "gpt-4o" if provider == "openai" else "claude-test-1"
    base_url = server.root + ("/v1" if provider == "openai" else "")
    settings: dict[str, Any] = {"timeout_s": 5.0, "max_retries": 2, "retry_base_delay_s": 0.01, "max_tokens": 2048}
    return LLMCritic(LLMConfig(provider, model, base_url=base_url, **(settings | overrides)), KEY)


def _rules(snapshot: Snapshot = PROFILED) -> Diagnosis:
    return RuleCritic().critique(snapshot, None, OPS, None, "triton")


def _fallback(critic: LLMCritic, why: str, snapshot: Snapshot = PROFILED) -> Diagnosis:
    return dataclasses.replace(_rules(snapshot), note=f"the LLM critic {critic.name} was not used: {why}")


# --- a good answer -----------------------------------------------------------------------------


def test_a_good_answer_becomes_the_advice(provider: str, serve: Callable[..., FakeServer]) -> None:
    server = serve(_reply(provider, json.dumps(ANSWER)))
    critic = _critic(provider, server)
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    rules = _rules()
    assert rules.bottleneck == "memory_bound"  # the measured facts below are the rules'
    assert diagnosis == dataclasses.replace(rules, next_steps=ADVICE, lead=LEAD, critic=critic.name)
    assert diagnosis.summary() == f"{LEAD}. Next: fuse the two passes."
    assert Diagnosis.from_json(diagnosis.to_json()) == diagnosis
    system, user = render_critic_prompt(PROFILED, None, rules, "triton")
    ((_, headers, body),) = server.requests
    assert headers["authorization"] == f"Bearer {KEY}"
    if provider == "openai":
        assert body["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": user}]
    else:
        assert (body["system"], body["messages"]) == (system, [{"role": "user", "content": user}])


def test_an_answer_in_a_code_fence_is_read(serve: Callable[..., FakeServer]) -> None:
    text = f"Here is my review.\n```json\n{json.dumps(ANSWER, indent=2)}\n```\n"
    critic = _critic("openai", serve(_reply("openai", text)))
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    assert diagnosis == dataclasses.replace(_rules(), next_steps=ADVICE, lead=LEAD, critic="openai:gpt-4o")


def test_no_bottleneck_is_named_for_a_failed_kernel(serve: Callable[..., FakeServer]) -> None:
    answer = {
        "bottleneck": "memory_bound",
        "summary": "The last column is dropped.",
        "next_steps": [{"title": "Mask the tail", "why": "error at column 17", "expected_effect": "a correct kernel"}],
    }
    critic = _critic("openai", serve(_reply("openai", json.dumps(answer))))
    diagnosis = critic.critique(FAILED, None, OPS, None, "triton")
    steps = (NextStep("Mask the tail", "error at column 17", (), "a correct kernel", 1, False),)
    rules = _rules(FAILED)
    assert diagnosis == dataclasses.replace(
        rules, next_steps=steps, lead="The last column is dropped", critic="openai:gpt-4o"
    )
    assert diagnosis.bottleneck is None


# --- anything else: the rule critic's diagnosis, and why -----------------------------------------


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("I think it is memory bound.", "the reply holds no JSON object"),
        ('{"summary": "fine", "next_steps": [}', "the reply's JSON does not parse (Expecting value: line 1 column 36 "
                                                 "(char 35))"),
        ('{"summary": "fine"}', "the reply has no next_steps list"),
        ('{"summary": "fine", "next_steps": [{"title": "x", "why": "y"}]}',
         "next step 1 has no 'expected_effect' text"),
        ('{"bottleneck": "slow", "summary": "s", "next_steps": []}',
         "bottleneck 'slow' is not null or one of memory_bound, compute_bound, latency_bound, under_utilised"),
        ('{"summary": "s", "next_steps": ["fuse"]}', "next step 1 is not an object"),
    ],
)  # fmt: skip
def test_a_malformed_answer_falls_back(reply: str, why: str, serve: Callable[..., FakeServer]) -> None:
    critic = _critic("anthropic", serve(_reply("anthropic", reply)))
    assert critic.critique(PROFILED, None, OPS, None, "triton") == _fallback(critic, why)


def test_500s_past_the_retries_fall_back(provider: str, serve: Callable[..., FakeServer]) -> None:
    server = serve(status(500, error_body(provider, "api_error", "boom")))
    critic = _critic(provider, server)
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    assert diagnosis == _fallback(critic, f"gave up after 3 attempts to {critic.config.endpoint}: HTTP 500: boom")
    assert len(server.requests) == 3


def test_500_then_a_good_answer_is_retried(serve: Callable[..., FakeServer]) -> None:
    server = serve(status(500, error_body("openai", "api_error", "boom")), _reply("openai", json.dumps(ANSWER)))
    diagnosis = _critic("openai", server).critique(PROFILED, None, OPS, None, "triton")
    assert (diagnosis.critic, diagnosis.next_steps, len(server.requests)) == ("openai:gpt-4o", ADVICE, 2)


def test_a_slow_reply_past_the_timeout_falls_back(provider: str, serve: Callable[..., FakeServer]) -> None:
    critic = _critic(provider, serve(silent(30.0)), timeout_s=0.5)
    started = time.monotonic()
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    assert diagnosis == _fallback(critic, f"no complete reply from {critic.config.endpoint} within timeout_s=0.5")
    assert time.monotonic() - started < 3.0


# --- the key -------------------------------------------------------------------------------------


def test_the_key_never_reaches_the_diagnosis(provider: str, serve: Callable[..., FakeServer]) -> None:
    echoed = dict(ANSWER, summary=f"Your key is {KEY}.")
    critic = _critic(provider, serve(_reply(provider, json.dumps(echoed))))
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    assert diagnosis.lead == "Your key is [redacted]"
    assert KEY not in json.dumps(diagnosis.to_json())
    assert KEY not in repr(critic)
    # A refused key: the rules stand, and the note says what to check without quoting the key.
    refused = serve(status(401, error_body(provider, "authentication_error", f"Incorrect API key: {KEY}")))
    critic = _critic(provider, refused)
    env = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    diagnosis = critic.critique(PROFILED, None, OPS, None, "triton")
    why = f"the API key was refused by {critic.config.endpoint} (HTTP 401): check {env}"
    assert diagnosis == _fallback(critic, why)
    assert KEY not in json.dumps(diagnosis.to_json())


# --- the prompt ----------------------------------------------------------------------------------


def test_the_prompt_carries_the_measurements_and_the_rules() -> None:
    best = dataclasses.replace(PROFILED, iteration=1, runtime_ms=0.2, speedup=1.25, intent="first try")
    system, user = render_critic_prompt(FAILED, best, _rules(FAILED), "triton")
    assert system.startswith("You are a GPU performance engineer reviewing one candidate kernel")
    assert (
        user
        == """\
# Review: iteration 4 (triton)

## What the evaluator measured

- status: incorrect
- what it tried: vectorise loads
- runtime: not timed
- evaluator: max abs error 0.5 at [3, 17]

## The roofline on the target GPU

- not known (the work was not counted, or the GPU is not in the hardware table)

## Per-kernel counters

None recorded.

## The previous best

- iteration 1 (first try): correct, 0.2 ms, 1.25x the reference

## The rule-based critic's diagnosis

- Status: incorrect · not timed: fix it before optimising
- bottleneck: unknown
- status incorrect: max abs error 0.5 at [3, 17]
- suggested step 1: Fix correctness first: the output does not match the reference \
(status incorrect: max abs error 0.5 at [3, 17])

## Your turn

Reply with the JSON object only.
"""
    )
    _, profiled = render_critic_prompt(PROFILED, None, _rules(), "triton")
    assert "- speed of light 0.1 ms, bound by memory (compute 0.00448 ms, memory 0.1 ms)\n" in profiled
    assert "- measured 0.139 ms: 71.9% of the memory ceiling, 1.39x the speed of light\n" in profiled
    assert "- softmax_kernel: l2_hit_rate_pct=45, registers_per_thread=40, launches=2\n" in profiled
