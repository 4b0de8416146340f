"""The main screen's panels. Each reads the shared :class:`SessionModel` when the app refreshes it.

Data flows down (the app calls ``refresh`` or ``apply_rows`` after folding events into the model),
messages flow up (the chat panel posts :class:`ChatPanel.Steer` when the user sends a hint).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Input, RichLog, Static
from textual.widgets.data_table import ColumnKey

from kernel_code.tui.state import CHAT_LIMIT, IterationView, SessionModel
from kernel_code.tui.text import (
    NOT_GPU,
    chat_text,
    decision_text,
    header_text,
    profile_text,
    speedup_text,
    trajectory_text,
)
from openkernel.loop import Controls

__all__ = ["ChatPanel", "ExperimentLog", "HeaderBar", "ProfilePanel", "TrajectoryPanel"]

STREAM_LINES = 2  # lines of the generator's live reply shown under the chat (a fixed height: no jumps)
INTENT_CHARS = 60
CHAT_PER_WRITE = 40  # chat lines written in one repaint at most (each costs a wrap and a render)


class HeaderBar(Widget):
    """The status line: version, GPU, backend (and a pending switch), problem, model, usage, state."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; }
    """

    def __init__(self, model: SessionModel, controls: Controls, read_only: bool, trace: bool) -> None:
        super().__init__(id="header")
        self.model, self.controls, self.read_only, self.trace = model, controls, read_only, trace

    def render(self) -> Text:
        pending = None if self.read_only else self.controls.pending_backend
        return header_text(self.model, self.size.width, pending, self.trace, self.read_only)


class TrajectoryPanel(Widget):
    """Speedup per iteration (the last that fit), decision symbols, the best figure."""

    DEFAULT_CSS = """
    TrajectoryPanel { height: 5; border: round $primary; padding: 0 1; }
    """

    def __init__(self, model: SessionModel) -> None:
        super().__init__(id="trajectory")
        self.model = model
        self.border_title = "Optimization Trajectory"

    def sync(self) -> None:
        self.border_subtitle = NOT_GPU if self.model.timings_are_gpu is False else ""
        self.refresh()

    def render(self) -> Text:
        return trajectory_text(self.model, self.content_size.width)


class ProfilePanel(Widget):
    """The latest evaluated kernel's profiling summary."""

    DEFAULT_CSS = """
    ProfilePanel { height: 8; border: round $primary; padding: 0 1; }
    """

    def __init__(self, model: SessionModel) -> None:
        super().__init__(id="profile")
        self.model = model
        self.border_title = "Profiling Summary"

    def sync(self) -> None:
        p = self.model.profile
        self.border_title = "Profiling Summary" + (f" · #{p.iteration}" if p is not None else "")
        self.refresh()

    def render(self) -> Text:
        return profile_text(self.model)


class ExperimentLog(DataTable[Text | str]):
    """One row per iteration, updated in place: a new event touches its own row, never the whole table."""

    DEFAULT_CSS = """
    ExperimentLog { height: 1fr; border: round $primary; }
    """

    def __init__(self, model: SessionModel) -> None:
        super().__init__(id="log", cursor_type="row", zebra_stripes=True)
        self.model = model
        self.border_title = "Experiment Log"
        self._shown_best: int | None = None

    def on_mount(self) -> None:
        self.add_column("#", key="n", width=5)
        self.add_column("speedup", key="speedup", width=8)
        self.add_column("decision", key="decision", width=8)
        # The intent column's width is set here, before the cells that need it, not measured by the table:
        # DataTable (textual 8.2.8) measures new rows only when idle and keeps the cells it rendered
        # before that at the label's width, so a new row's intent stayed cut ("bad ti") until the next
        # change.
        self.add_column("intent", key="intent", width=cell_len("intent"))

    def apply_rows(self, rows: list[IterationView]) -> None:
        """Add or update the rows of ``rows``, and restyle the rows that gained or lost the best mark."""
        best = self.model.best_iteration
        if best != self._shown_best:
            extra = [self.model.iterations[i] for i in (self._shown_best, best) if i in self.model.iterations]
            rows = [*rows, *(v for v in extra if v not in rows)]
            self._shown_best = best
        following = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        intent = self.columns[ColumnKey("intent")]
        for view in rows:
            key = str(view.iteration)
            flagged = view.speedup is not None and view.timing_valid is False  # * : not a GPU timing
            speedup = Text(speedup_text(view.speedup) + ("*" if flagged else ""))
            cells: dict[str, Text | str] = {
                "n": f"#{view.iteration}",
                "speedup": speedup,
                "decision": decision_text(view, best),
                "intent": (view.intent or ("running" if view.decision is None else "—"))[:INTENT_CHARS],
            }
            intent.width = max(intent.width, cell_len(str(cells["intent"])))  # widen before the cell changes
            if key in self.rows:
                for column, value in cells.items():
                    self.update_cell(key, column, value, update_width=column == "intent")
            else:
                self.add_row(*cells.values(), key=key)
        self.border_subtitle = f"* {NOT_GPU}" if self.model.timings_are_gpu is False else ""
        if following and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)


class ChatPanel(Vertical):
    """The agent's side: verdicts, the critic, the generator's reply as it streams, and the steering line."""

    DEFAULT_CSS = """
    ChatPanel { border: round $primary; }
    ChatPanel > RichLog { height: 1fr; background: transparent; }
    ChatPanel > #stream { height: 2; color: $text-muted; }
    ChatPanel > #skills { height: auto; max-height: 12; border-top: solid $secondary; display: none; }
    ChatPanel > #skills.shown { display: block; }
    ChatPanel > Input { height: 3; }
    """

    class Steer(Message):
        """The user sent a hint for the next iteration."""

        def __init__(self, hint: str) -> None:
            super().__init__()
            self.hint = hint

    def __init__(self, model: SessionModel, read_only: bool) -> None:
        super().__init__(id="chat")
        self.model, self.read_only = model, read_only
        self.border_title = "Chat / Agent"
        self._shown = 0  # chat lines of the model already written

    def compose(self) -> ComposeResult:
        yield RichLog(max_lines=CHAT_LIMIT, wrap=True, min_width=20, id="chat-log")
        yield Static("", id="stream")
        yield Static("", id="skills")
        placeholder = "replay: steering is off" if self.read_only else "i: steer the next iteration (enter sends)"
        yield Input(placeholder=placeholder, id="steer")

    def write_new(self) -> None:
        """Write the chat lines added since the last call; past ``CHAT_PER_WRITE``, only the latest ones."""
        log = self.query_one(RichLog)
        lines = self.model.chat_since(self._shown)
        skipped = self.model.chat_total - self._shown - CHAT_PER_WRITE
        if skipped > 0:  # a replay at full speed: nobody reads thousands of lines flying by
            log.write(Text(f"… {skipped:,} lines not shown", style="dim"))
        for line in lines[-CHAT_PER_WRITE:]:
            log.write(chat_text(line.kind, line.text))
        self._shown = self.model.chat_total

    def show_stream(self) -> None:
        tail = self.model.stream.rstrip().splitlines()[-STREAM_LINES:]
        self.query_one("#stream", Static).update(Text("\n".join(f"⋯ {line[:200]}" for line in tail)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Steer(event.value))
        event.input.value = ""
