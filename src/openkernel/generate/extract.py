"""Taking the candidate file out of an LLM reply, and saying exactly what is wrong when we cannot.

A reply must hold exactly one fenced Python block (```python, ```py, or a plain ```) with the whole
candidate file, which must parse and define ``class ModelNew``. Anything else is not an exception
but an :class:`Extracted` with ``source=None`` and an ``error`` written for the model: the loop
records it and the next prompt repeats it, so the model can correct itself.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["INTENT_MAX_CHARS", "NO_CODE_BLOCK", "UNCLOSED_CODE_BLOCK", "Extracted", "extract_candidate"]

INTENT_MAX_CHARS = 60  # an intent is a label in tables and traces, not an explanation

NO_CODE_BLOCK = "no code block: reply with exactly one ```python fenced block holding the whole candidate file"
UNCLOSED_CODE_BLOCK = (
    "the code block is not closed (was the reply cut off at max_tokens?): "
    "reply with exactly one complete ```python fenced block"
)

# A fence opens at the start of a line with ``` and an optional language tag, and closes at the next
# line that is only ```. Blocks in other languages (```cuda, ```text) are explanation, not the file.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_LANGUAGES = frozenset({"", "python", "py", "python3"})
_INTENT = re.compile(r"^[ \t>*_#-]*intent[ \t*_]*:[ \t*_]*(.+?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class Extracted:
    source: str | None  # the candidate file's text; None when the reply holds no usable one
    intent: str  # a few words; "" when the reply gives nothing to go on
    error: str | None  # why ``source`` is None, written for the model to act on


def extract_candidate(reply: str) -> Extracted:
    """The one candidate file in ``reply``, or the reason there is none."""
    blocks = [m for m in _FENCE.finditer(reply) if m.group(1).lower() in _CODE_LANGUAGES]
    intent = _intent(reply)
    if not blocks:
        unclosed = re.search(r"^[ \t]*```", reply, re.MULTILINE) is not None and not list(_FENCE.finditer(reply))
        return Extracted(None, intent, UNCLOSED_CODE_BLOCK if unclosed else NO_CODE_BLOCK)
    if len(blocks) > 1:
        error = (
            f"{len(blocks)} code blocks: reply with exactly one ```python fenced block "
            f"holding the whole candidate file, not {len(blocks)}"
        )
        return Extracted(None, intent, error)
    source: str = blocks[0].group(2)
    problem = _check_source(source)
    return Extracted(None if problem else source, intent, problem)


def _check_source(source: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return f"syntax error at line {err.lineno}: {err.msg}"
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    if "ModelNew" in classes:
        return None
    near = [name for name in classes if _normalised(name).startswith("model")]
    if near:
        return (
            f"no class ModelNew: found class {near[0]}; rename it to ModelNew (same constructor and forward as Model)"
        )
    return (
        "no class ModelNew: the candidate file must define class ModelNew(nn.Module) "
        "with the same constructor and forward as Model"
    )


def _normalised(name: str) -> str:
    return name.lower().replace("_", "")


def _intent(reply: str) -> str:
    prose = _FENCE.sub("", reply)
    match = _INTENT.search(prose)
    if match is not None:
        return _trim(match.group(1))
    for line in prose.splitlines():
        text = line.strip().lstrip("#>*-_ ").strip()
        if text.startswith("```"):
            break
        if text:
            return _trim(_SENTENCE_END.split(text, maxsplit=1)[0])
    return ""


def _trim(text: str) -> str:
    text = text.strip().rstrip("*_").strip()
    if len(text) <= INTENT_MAX_CHARS:
        return text
    return text[: INTENT_MAX_CHARS - 3].rstrip() + "..."
