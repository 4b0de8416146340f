"""Secrets out of text before it is written anywhere a trace (or a session's prompt file) can carry it.

Prompts, replies and kernels are free text that a person or a model wrote: an API key pasted into a
hint, a token echoed in a reply, a ``.env`` line copied into a kernel. Every credential shape below is
replaced by ``[REDACTED:<kind>]`` (the kind says what was there, never any of its characters).

The patterns are deliberately narrow where kernel code lives: ``MAX_TOKEN = 128`` or ``num_tokens =
x.shape[0]`` are not secrets, so an assignment counts only when its name looks like a credential
variable and its value like a credential. Scrubbing is idempotent (a redaction marker is never
redacted again), so text scrubbed when a session recorded it can be scrubbed again on export.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["KINDS", "scrub"]

MARKER = "[REDACTED:{kind}]"

# (kind, pattern, triggers): a pattern runs only on text holding one of its triggers (a plain substring
# test; one without capitals is looked for in any case), which keeps the common case (no secret
# anywhere) a handful of ``in`` tests. Most specific first. A group named ``keep`` stays in place (a
# header's or an assignment's name and quotes); ``(?!\[REDACTED:)`` makes a second pass a no-op.
_PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
        ("PRIVATE KEY-----",),
    ),
    ("anthropic_key", r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{8,}", ("sk-ant-",)),
    ("openai_key", r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{16,}", ("sk-",)),
    ("aws_access_key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", ("AKIA", "ASIA")),
    (
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    ("huggingface_token", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}", ("hf_",)),
    ("slack_token", r"(?<![A-Za-z0-9_])xox[abposr]-[A-Za-z0-9-]{10,}", ("xox",)),
    ("google_api_key", r"(?<![A-Za-z0-9_])AIza[A-Za-z0-9_-]{35}", ("AIza",)),
    # "Authorization: <anything>" to the end of the line (HTTP headers, curl -H, dict literals)
    (
        "authorization",
        r"(?P<keep>(?i:\b(?:proxy-)?authorization)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED:)[^\s\"'][^\"'\r\n]*",
        ("authorization",),
    ),
    ("bearer_token", r"(?P<keep>(?i:\bbearer)\s+)(?!\[REDACTED:)[A-Za-z0-9._~+/=-]{12,}", ("bearer",)),
    # SOME_API_KEY=..., GITHUB_TOKEN: ..., DB_PASSWORD="..." (environment-style names, values of 8+)
    (
        "assignment",
        r"(?P<keep>\b(?:[A-Z][A-Z0-9_]*_)?(?:API_KEY|APIKEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD)"
        r"\b[\"']?\s*(?:=|:)\s*[\"']?)(?!\[REDACTED:)[^\s\"'`]{8,}",
        ("API_KEY", "APIKEY", "TOKEN", "SECRET", "ACCESS_KEY", "PASSWORD", "PASSWD"),
    ),
    # password = "...", db_password: '...', api_key="..." (lower-case names: a quoted literal, any length)
    (
        "password",
        r"(?P<keep>(?i:(?<![a-z0-9])(?:password|passwd|api_key|apikey|secret_key|client_secret|access_token|auth_token))"
        r"[\"']?\s*(?:=|:)\s*(?P<q>[\"']))(?!\[REDACTED:)[^\"'\r\n]+(?=(?P=q))",
        ("passw", "api_key", "apikey", "secret_key", "client_secret", "access_token", "auth_token"),
    ),
    # password=hunter2 on its own (a URL query, a .env or .netrc line)
    ("password", r"(?P<keep>(?i:(?<![a-z0-9])password)\s*=\s*)(?!\[REDACTED:)[^\s\"'&;,]+", ("password",)),
)

KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _, _ in _PATTERNS))

# (marker, pattern, triggers to find as they are, triggers to find in any case)
_COMPILED = tuple(
    (
        MARKER.format(kind=kind),
        re.compile(pattern, re.DOTALL),
        tuple(t for t in triggers if not t.islower()),
        tuple(t for t in triggers if t.islower()),
    )
    for kind, pattern, triggers in _PATTERNS
)


_ALL_EXACT = tuple(dict.fromkeys(t for _, _, exact, _ in _COMPILED for t in exact))
_ALL_ANY_CASE = tuple(dict.fromkeys(t for _, _, _, any_case in _COMPILED for t in any_case))


def scrub(text: str) -> str:
    """``text`` with every credential-shaped substring replaced by ``[REDACTED:<kind>]``."""
    lowered = text.lower()
    if not _found(text, _ALL_EXACT) and not _found(lowered, _ALL_ANY_CASE):
        return text  # the common case: not even a trigger
    for marker, pattern, exact, any_case in _COMPILED:
        if _found(text, exact) or _found(lowered, any_case):
            replaced = pattern.sub(_replacer(marker), text)
            if replaced != text:
                text, lowered = replaced, replaced.lower()
    return text


def _found(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


def _replacer(marker: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return (match.groupdict().get("keep") or "") + marker

    return replace
