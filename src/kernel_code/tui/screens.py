"""Modal screens over the main one: a kernel's source, the diff against the previous best, the roofline.

Each closes with escape, q, or the key that opened it, and leaves the session running underneath.
"""

from __future__ import annotations

from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kernel_code.tui.diff import side_by_side

__all__ = ["DiffScreen", "KernelScreen", "RooflineScreen"]

_CLOSE = "close (esc)"


class _Overlay(ModalScreen[None]):
    """A framed modal with a title line; subclasses give the body."""

    DEFAULT_CSS = """
    _Overlay { align: center middle; }
    _Overlay > Vertical { width: 100%; height: 100%; border: thick $accent; background: $surface; }
    _Overlay #title { height: auto; background: $accent; color: $text; padding: 0 1; }
    _Overlay #body { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", _CLOSE)]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"{self.title_text}  (esc closes)", style="bold"), id="title")
            yield from self.body()

    def body(self) -> ComposeResult:
        raise NotImplementedError


class KernelScreen(_Overlay):
    """One kernel's source, highlighted, with line numbers."""

    def __init__(self, title: str, source: str) -> None:
        super().__init__(title)
        self.source = source

    def body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield Static(Syntax(self.source, "python", theme="monokai", line_numbers=True), id="source")


class DiffScreen(_Overlay):
    """The latest kernel (right) against the previous best (left), aligned; both sides scroll together."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("k", "dismiss", _CLOSE, show=False)]
    DEFAULT_CSS = """
    DiffScreen #sides { height: auto; }
    DiffScreen #sides > Static { width: 1fr; text-wrap: nowrap; text-overflow: clip; }
    DiffScreen #old { border-right: solid $secondary; }
    """

    def __init__(self, old_title: str, old: str, new_title: str, new: str) -> None:
        diff = side_by_side(old, new)
        title = f"{old_title}  →  {new_title}   (+{diff.added} −{diff.removed} lines: - removed, + added, ~ changed)"
        super().__init__(title)
        self.diff = diff

    def body(self) -> ComposeResult:
        with VerticalScroll(id="body"), Horizontal(id="sides"):
            yield Static(self.diff.left, id="old")
            yield Static(self.diff.right, id="new")


class RooflineScreen(_Overlay):
    """The roofline plot (drawn by the app for the screen's size) and what it leaves out."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("r", "dismiss", _CLOSE, show=False)]

    def __init__(self, plot: Text) -> None:
        super().__init__("Roofline")
        self.plot = plot

    def body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield Static(self.plot, id="plot")
