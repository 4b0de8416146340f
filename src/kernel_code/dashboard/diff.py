"""The code diff: two kernels side by side, line-aligned by difflib and coloured by pygments (pure).

``diff_rows`` pairs the lines of two sources; ``highlight`` splits one line into (text, colour)
pieces. The session page turns both into an HTML table; keeping them pure keeps them testable.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from pygments.lexers import CppLexer, PythonLexer
from pygments.token import Comment, Keyword, Name, Number, String, _TokenType

from openkernel.traces.scrub import scrub

__all__ = ["DiffRow", "diff_rows", "highlight"]

_COLOURS: tuple[tuple[_TokenType, str], ...] = (  # the first matching ancestor wins
    (Comment, "#6a737d"),
    (String, "#a31515"),
    (Number, "#098658"),
    (Keyword, "#0000ff"),
    (Name.Builtin, "#795e26"),
    (Name.Function, "#795e26"),
    (Name.Class, "#267f99"),
    (Name.Decorator, "#af00db"),
)
_PYTHON, _CPP = PythonLexer(), CppLexer()


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "same", "changed", "removed" (left only), "added" (right only)
    left_no: int | None  # 1-based line numbers
    left: str
    right_no: int | None
    right: str


def diff_rows(left: str, right: str) -> list[DiffRow]:
    """The two sources aligned line by line, scrubbed of anything credential-shaped."""
    a, b = scrub(left).splitlines(), scrub(right).splitlines()
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows.extend(DiffRow("same", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]) for k in range(i2 - i1))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            li, rj = i1 + k, j1 + k
            has_left, has_right = li < i2, rj < j2
            kind = "changed" if has_left and has_right else ("removed" if has_left else "added")
            rows.append(
                DiffRow(
                    kind,
                    li + 1 if has_left else None,
                    a[li] if has_left else "",
                    rj + 1 if has_right else None,
                    b[rj] if has_right else "",
                )
            )
    return rows


def highlight(line: str, language: str = "python") -> list[tuple[str, str | None]]:
    """``line`` as (text, colour) pieces; colour None is the default text colour."""
    lexer = _CPP if language == "cuda" else _PYTHON
    pieces: list[tuple[str, str | None]] = []
    for token, raw in lexer.get_tokens(line):
        text = raw.removesuffix("\n")  # the lexer ends every input with a newline
        if not text:
            continue
        colour = next((c for kind, c in _COLOURS if token in kind), None)
        if pieces and pieces[-1][1] == colour:
            pieces[-1] = (pieces[-1][0] + text, colour)
        else:
            pieces.append((text, colour))
    return pieces
