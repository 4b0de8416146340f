"""Secrets out of free text: every credential shape, and kernel code left exactly as it was."""

from __future__ import annotations

import pytest

from openkernel.traces.scrub import KINDS, scrub

CASES = [
    ("key sk-proj-AbCdEfGhIjKlMnOpQrStUv0123 end", "key [REDACTED:openai_key] end"),
    ("sk-ant-api03-AbCdEfGhIjKlMnOp_0123-xyz.", "[REDACTED:anthropic_key]."),
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED:aws_access_key] here"),
    ("clone with ghp_0123456789abcdefghijABCDEFGHIJklmnop", "clone with [REDACTED:github_token]"),
    ("HF hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "HF [REDACTED:huggingface_token]"),
    ("slack xoxb-123456789012-abcdefABCDEF", "slack [REDACTED:slack_token]"),
    ("g AIzaSyA-0123456789abcdefghijklmnopqrstu", "g [REDACTED:google_api_key]"),
    ("Authorization: Bearer abc.def.ghi\nnext", "Authorization: [REDACTED:authorization]\nnext"),
    ('headers = {"authorization": "Basic dXNlcjpwYXNz"}', 'headers = {"authorization": "[REDACTED:authorization]"}'),
    ("send it with bearer eyJhbGciOiJIUzI1NiJ9.e30.x please", "send it with bearer [REDACTED:bearer_token] please"),
    ("OPENAI_API_KEY=not-a-known-shape-123", "OPENAI_API_KEY=[REDACTED:assignment]"),
    ("export GITHUB_TOKEN='0123456789abcdef'", "export GITHUB_TOKEN='[REDACTED:assignment]'"),
    ("DB_PASSWORD: hunter2hunter2", "DB_PASSWORD: [REDACTED:assignment]"),
    ('password = "hunter2"', 'password = "[REDACTED:password]"'),
    ("db_password: 'x'", "db_password: '[REDACTED:password]'"),
    ('client = Client(api_key="abc")', 'client = Client(api_key="[REDACTED:password]")'),
    ("https://db/?user=a&password=hunter2&x=1", "https://db/?user=a&password=[REDACTED:password]&x=1"),
    (
        "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nb",
        "a\n[REDACTED:private_key]\nb",
    ),
    ("cut short\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r", "cut short\n[REDACTED:private_key]"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_each_credential_shape_is_redacted_by_kind(text: str, expected: str) -> None:
    assert scrub(text) == expected
    assert scrub(expected) == expected  # a second pass changes nothing


def test_every_kind_has_a_case() -> None:
    seen = {kind for _, expected in CASES for kind in KINDS if f"[REDACTED:{kind}]" in expected}
    assert seen == set(KINDS)


def test_a_key_in_an_assignment_is_redacted_once() -> None:
    text = "export OPENAI_API_KEY=sk-AbCdEfGhIjKlMnOpQrStUv\ncurl -H 'Authorization: Bearer sk-AbCdEfGhIjKlMnOpQrStUv'"
    once = scrub(text)
    assert once == "export OPENAI_API_KEY=[REDACTED:openai_key]\ncurl -H 'Authorization: [REDACTED:authorization]'"
    assert scrub(once) == once


KERNEL = """\
import torch
import triton
import triton.language as tl

MAX_TOKEN = 128  # not a secret: a short value
SECRET_SAUCE_BLOCKS = 4


@triton.jit
def _softmax(x_ptr, out_ptr, n_cols, num_tokens, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    task_mask-1234567890abcdefghij = 0  # "sk-" inside a word is not a key
    tl.store(out_ptr + row * n_cols + offs, tl.exp(x) / tl.sum(tl.exp(x), axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, tokens_per_block=64):
        bearer_count = 3  # "bearer" without a token after it
        return x
"""


def test_kernel_code_is_left_exactly_as_it_was() -> None:
    assert scrub(KERNEL) == KERNEL
