"""Ranking skills for a problem, its profile and the critic's diagnosis, with the reasons shown.

The scoring is a short sum of named weights rather than anything learned, so that a person reading
``kernel-code skills --match ...`` (or a prompt) can see exactly why a technique came first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from openkernel.skills.library import BACKENDS, BOTTLENECKS, OP_CLASSES, SIGNALS, Skill, load_skills

__all__ = [
    "BOTTLENECK_WEIGHT",
    "OP_CLASS_ANY_WEIGHT",
    "OP_CLASS_WEIGHT",
    "SIGNAL_WEIGHT",
    "MatchQuery",
    "SkillMatch",
    "match_skills",
    "parse_match_spec",
    "prompt_section",
]

BOTTLENECK_WEIGHT = 3.0  # the diagnosis names what limits the kernel: the strongest single hint
SIGNAL_WEIGHT = 2.0  # per profile signal the skill addresses
OP_CLASS_WEIGHT = 2.0  # per op class of the problem the skill names
OP_CLASS_ANY_WEIGHT = 1.0  # a skill for "any" op class fits, but less specifically

_HARDWARE = re.compile(r"sm_[0-9]{2,3}a?")
_QUERY_OP_CLASSES = tuple(c for c in OP_CLASSES if c != "any")
_EXAMPLE = "memory_bound,softmax,low_l2_hit"


@dataclass(frozen=True)
class MatchQuery:
    """What is known about the kernel being optimised. Empty or ``None`` fields match nothing and exclude nothing."""

    op_classes: tuple[str, ...] = ()
    bottleneck: str | None = None
    signals: tuple[str, ...] = ()
    hardware: str | None = None  # compute capability of the target GPU, e.g. "sm_90"
    backend: str | None = None  # "triton" or "cuda"


@dataclass(frozen=True)
class SkillMatch:
    """A skill, its score under the query, and the reasons that add up to that score."""

    skill: Skill
    score: float
    because: tuple[str, ...]  # e.g. ("bottleneck memory_bound", "signal low_l2_hit", "op class matmul")


def match_skills(query: MatchQuery, skills: Sequence[Skill] | None = None, limit: int = 8) -> list[SkillMatch]:
    """The best ``limit`` skills for ``query``, highest score first, ties broken by id.

    Exclusions come first:

    - hardware: a skill for named GPUs (e.g. ``["sm_90"]``) is dropped when the query names another one
      (``sm_90a`` counts as ``sm_90``);
    - backend: a skill without an example for the query's backend is dropped when the query names one;
    - op class: when the query names op classes, a skill naming none of them (and not "any") is dropped.

    Then the score is the sum of: bottleneck match 3, each shared signal 2, each shared op class 2
    (a skill for "any" op class gets 1 instead). Skills scoring 0 are not returned.
    """
    matches: list[SkillMatch] = []
    for skill in load_skills() if skills is None else skills:
        if _excluded(query, skill):
            continue
        because: list[str] = []
        score = 0.0
        if query.bottleneck is not None and query.bottleneck in skill.bottlenecks:
            score += BOTTLENECK_WEIGHT
            because.append(f"bottleneck {query.bottleneck}")
        for signal in query.signals:
            if signal in skill.signals:
                score += SIGNAL_WEIGHT
                because.append(f"signal {signal}")
        for op_class in query.op_classes:
            if op_class in skill.op_classes:
                score += OP_CLASS_WEIGHT
                because.append(f"op class {op_class}")
        if query.op_classes and skill.op_classes == ("any",):
            score += OP_CLASS_ANY_WEIGHT
            because.append("op class any")
        if score > 0:
            matches.append(SkillMatch(skill=skill, score=score, because=tuple(because)))
    matches.sort(key=lambda m: (-m.score, m.skill.id))
    return matches[:limit]


def _excluded(query: MatchQuery, skill: Skill) -> bool:
    if query.hardware is not None and skill.hardware != ("any",) and not _same_arch(query.hardware, skill.hardware):
        return True
    if query.backend is not None and query.backend not in skill.backends:
        return True
    return bool(query.op_classes) and skill.op_classes != ("any",) and not set(query.op_classes) & set(skill.op_classes)


def _same_arch(hardware: str, targets: tuple[str, ...]) -> bool:
    # "sm_90a" (the arch-specific feature set) is still an sm_90 for matching purposes.
    return hardware.removesuffix("a") in {t.removesuffix("a") for t in targets}


def parse_match_spec(text: str) -> MatchQuery:
    """Read a ``--match`` spec: words separated by commas or spaces, each recognised by its vocabulary.

    ``"memory_bound,softmax,low_l2_hit,sm_90,triton"`` is bottleneck memory_bound, op class softmax,
    signal low_l2_hit, hardware sm_90, backend triton. The vocabularies do not overlap, so no keys are needed.
    """
    words = [w for w in re.split(r"[,\s]+", text.strip()) if w]
    if not words:
        raise ValueError(f"empty match spec: name words such as {_EXAMPLE}")
    op_classes: list[str] = []
    signals: list[str] = []
    bottleneck = hardware = backend = None
    for word in words:
        if word in BOTTLENECKS:
            bottleneck = _once("bottlenecks", bottleneck, word)
        elif word in _QUERY_OP_CLASSES:
            op_classes.append(word)
        elif word in SIGNALS:
            signals.append(word)
        elif word in BACKENDS:
            backend = _once("backends", backend, word)
        elif _HARDWARE.fullmatch(word):
            hardware = _once("hardware targets", hardware, word)
        elif word == "any":
            raise ValueError("op class 'any' is not a query: leave the op class out to match every op class")
        else:
            raise ValueError(_unknown(word))
    return MatchQuery(
        op_classes=tuple(dict.fromkeys(op_classes)),
        bottleneck=bottleneck,
        signals=tuple(dict.fromkeys(signals)),
        hardware=hardware,
        backend=backend,
    )


def _unknown(word: str) -> str:
    known = [*BOTTLENECKS, *_QUERY_OP_CLASSES, *SIGNALS, *BACKENDS]
    close = difflib.get_close_matches(word, known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"unknown word {word!r} in match spec: {hint}use bottlenecks ({', '.join(BOTTLENECKS)}), "
        f"op classes ({', '.join(_QUERY_OP_CLASSES)}), signals ({', '.join(SIGNALS)}), "
        f"hardware like sm_90, or backend triton/cuda; e.g. {_EXAMPLE}"
    )


def _once(kinds: str, current: str | None, word: str) -> str:
    if current is not None and current != word:
        raise ValueError(f"match spec names two {kinds} ({current} and {word}): keep one")
    return word


def prompt_section(matches: Sequence[SkillMatch], backend: str | None = None) -> str:
    """The matches as plain text for a generator's prompt: why each applies, and its example in ``backend``."""
    parts: list[str] = []
    for rank, match in enumerate(matches, start=1):
        skill = match.skill
        lines = [
            f"{rank}. {skill.title} [{skill.id}] (matched: {', '.join(match.because)})",
            f"   What: {skill.what}",
            f"   Why: {skill.why}",
            f"   Typical effect: {skill.typical_effect}",
        ]
        example = {"triton": skill.triton_example, "cuda": skill.cuda_example}.get(backend or "")
        if example is not None:
            lines.append(f"   Example ({backend}):\n```\n{example}```")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
