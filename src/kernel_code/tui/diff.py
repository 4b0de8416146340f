"""A side-by-side diff of two kernel sources, syntax highlighted, lines aligned (pure; rich ``Text``).

Each side is highlighted whole (so that the lexer sees the real file), then split into lines and
laid out on rows aligned by ``difflib``: a line only on the left gets ``-``, only on the right ``+``,
a changed pair ``~`` on both, and a blank filler faces an insertion. The markers carry the meaning;
the background tint only repeats it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from rich.syntax import Syntax
from rich.text import Text

__all__ = ["SideBySide", "side_by_side"]

_THEME = "monokai"
_REMOVED, _ADDED = "on #3b1d1d", "on #1d3b22"


@dataclass(frozen=True)
class SideBySide:
    left: Text
    right: Text
    added: int  # lines only on the right, or changed
    removed: int  # lines only on the left, or changed


def _lines(source: str) -> list[Text]:
    highlighted = Syntax(source, "python", theme=_THEME).highlight(source)
    lines = highlighted.split("\n")
    return lines[: len(source.splitlines())] if source.splitlines() else []


def side_by_side(old: str, new: str) -> SideBySide:
    """``old`` on the left, ``new`` on the right, aligned row by row."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    old_hl, new_hl = _lines(old), _lines(new)
    left: list[Text] = []
    right: list[Text] = []
    added = removed = 0
    width = len(str(max(len(old_lines), len(new_lines), 1)))

    def row(side: list[Text], marker: str, number: int | None, line: Text | None, tint: str) -> None:
        text = Text(
            f"{marker} {'' if number is None else number + 1:>{width}} ", style=f"bold {tint}" if tint else "dim"
        )
        if line is not None:
            body = line.copy()
            if tint:
                body.stylize(tint)
            text.append_text(body)
        side.append(text)

    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(a0, a1), range(b0, b1), strict=True):
                row(left, " ", i, old_hl[i], "")
                row(right, " ", j, new_hl[j], "")
            continue
        marker_left = "~" if op == "replace" else "-"
        marker_right = "~" if op == "replace" else "+"
        for k in range(max(a1 - a0, b1 - b0)):
            i, j = a0 + k, b0 + k
            if i < a1:
                row(left, marker_left, i, old_hl[i], _REMOVED)
                removed += 1
            else:
                row(left, " ", None, None, "")
            if j < b1:
                row(right, marker_right, j, new_hl[j], _ADDED)
                added += 1
            else:
                row(right, " ", None, None, "")
    joined = [Text("\n", no_wrap=True, overflow="crop").join(side) for side in (left, right)]
    return SideBySide(joined[0], joined[1], added, removed)
