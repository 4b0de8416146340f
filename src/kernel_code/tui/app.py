"""The kernel code TUI: a live (or replayed) session on one screen, keys for the deeper views.

The engine's event stream runs on a plain daemon thread that only puts events on a queue; a timer
on the UI drains the queue 20 times a second, folds the events into the :class:`SessionModel` and
repaints the panels they touched, once per batch. So the UI never waits on the engine, a burst of
streamed text costs one repaint, and a force quit (ctrl+q) does not wait on an evaluation.

The ``d`` key's hook (import Dash, start the server: about 2 s the first time) runs in a thread worker
too; the chat says "starting…" and the link follows when the hook answers.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Input, Static

from kernel_code.tui.roofline import roofline_view
from kernel_code.tui.screens import DiffScreen, KernelScreen, RooflineScreen
from kernel_code.tui.state import IterationView, SessionModel
from kernel_code.tui.widgets import ChatPanel, ExperimentLog, HeaderBar, ProfilePanel, TrajectoryPanel
from openkernel.critic import op_classes_of
from openkernel.errors import ConfigError
from openkernel.events import Event
from openkernel.loop import Controls
from openkernel.skills.matcher import MatchQuery, match_skills

__all__ = [
    "DASHBOARD_NOT_BUILT",
    "DASHBOARD_STARTING",
    "DashboardHook",
    "EventSource",
    "KernelCodeApp",
    "TuiOptions",
]

EventSource = Callable[[Controls], Iterable[Event]]  # the engine (or a replay), steered by the controls
DashboardHook = Callable[[Path | None], str]  # the session directory -> a line for the chat (the link)
DASHBOARD_NOT_BUILT = "dashboard: not built yet (issue 7)"
DASHBOARD_STARTING = "dashboard: starting… (the link follows)"
DRAIN_S = 0.05  # how often the UI folds queued events (seconds)
DRAIN_MAX = 1_000  # events folded per drain at most (~150 iterations), so that one drain stays short
SKILLS_SHOWN = 5


def _no_dashboard(_session_dir: Path | None) -> str:
    return DASHBOARD_NOT_BUILT


@dataclass(frozen=True)
class TuiOptions:
    session_dir: Path | None = None  # where kernel files are read from (None: kernel sources unavailable)
    read_only: bool = False  # a replay: pause, backend switch and steering are off
    trace: bool = False  # trace capture on (shown in the header)
    dashboard: DashboardHook = _no_dashboard


@dataclass(frozen=True)
class _Done:
    error: BaseException | None


class KernelCodeApp(App[int]):
    """One session on screen. ``engine_error`` holds what the engine raised, for the CLI to report."""

    CSS_PATH = "app.tcss"
    TITLE = "kernel code"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "dashboard", "dash"),
        Binding("k", "diff", "diff"),
        Binding("r", "roofline", "roofline"),
        Binding("s", "skills", "skills"),
        Binding("p", "pause", "pause"),
        Binding("b", "backend", "backend"),
        Binding("i", "steer", "steer"),
        Binding("q", "quit_session", "quit"),
        Binding("escape", "focus_log", "back to the log", show=False),
    ]

    def __init__(self, source: EventSource, options: TuiOptions | None = None, controls: Controls | None = None):
        super().__init__()
        self.source, self.options = source, options or TuiOptions()
        self.controls = controls or Controls()
        self.model = SessionModel()
        self.engine_error: BaseException | None = None
        self.engine_done = False
        self.events_seen = 0  # events folded into the model so far
        self.quitting = False
        self._dashboard_asked = False  # d was pressed before: the dashboard is up (or said why not)
        self._dashboard_pending = False  # the hook is running in its worker
        self._queue: queue.SimpleQueue[Event | _Done] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._pump, name="kernel-code-engine", daemon=True)

    # ------------------------------------------------------------------ layout and the engine thread

    def compose(self) -> ComposeResult:
        yield HeaderBar(self.model, self.controls, self.options.read_only, self.options.trace)
        with Horizontal(id="body"):
            yield ChatPanel(self.model, self.options.read_only)
            with Vertical(id="right"):
                yield TrajectoryPanel(self.model)
                yield ProfilePanel(self.model)
                yield ExperimentLog(self.model)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ExperimentLog).focus()
        self.set_interval(DRAIN_S, self.drain)
        self._thread.start()

    def _pump(self) -> None:
        """The engine thread: run the event stream, hand each event to the UI through the queue."""
        error: BaseException | None = None
        try:
            for event in self.source(self.controls):
                self._queue.put(event)
        except BaseException as err:  # reported on screen and re-raised by the CLI after the app exits
            error = err
        self._queue.put(_Done(error))

    def drain(self) -> None:
        """Fold the queued events into the model and repaint what they changed (one batch per call)."""
        if not self.query(ChatPanel):
            return  # the panels are not mounted yet, or exit is removing them: the events wait in the queue
        done: _Done | None = None
        for _ in range(DRAIN_MAX):
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Done):
                done = item
                break
            self.model.apply(item)
            self.events_seen += 1
        if done is not None:
            self._engine_finished(done.error)
        self.repaint()
        if self.quitting and (self.engine_done or self.model.phase == "finished"):
            self.exit(0)

    def _engine_finished(self, error: BaseException | None) -> None:
        self.engine_done = True
        if error is not None:
            self.engine_error = error
            self.model.say("bad", f"✗ the engine stopped: {error}")
            self.model.say("info", "q exits")
        elif self.model.phase == "finished" and not self.options.read_only:
            self.model.say("info", "the session is closed: q exits")
        elif self.options.read_only:
            self.model.say("info", "▷ replay complete: q exits")

    def repaint(self) -> None:
        dirty = self.model.take_dirty()
        rows = self.model.take_changed_rows()
        if "header" in dirty:
            self.query_one(HeaderBar).refresh()
        chat = self.query_one(ChatPanel)
        if "chat" in dirty:
            chat.write_new()
        if "stream" in dirty:
            chat.show_stream()
        if "trajectory" in dirty or "header" in dirty:
            self.query_one(TrajectoryPanel).sync()
        if "profile" in dirty:
            self.query_one(ProfilePanel).sync()
            if self.query_one("#skills", Static).has_class("shown"):
                self._show_skills()
        if rows or "header" in dirty:
            self.query_one(ExperimentLog).apply_rows(rows)

    def say(self, kind: str, text: str) -> None:
        self.model.say(kind, text)  # type: ignore[arg-type]
        self.repaint()

    # ------------------------------------------------------------------ keys

    def action_dashboard(self) -> None:
        if self._dashboard_pending:
            self.say("info", DASHBOARD_STARTING)
            return
        if not self._dashboard_asked:  # the first time is the slow one (Dash's import, the server's start)
            self.say("info", DASHBOARD_STARTING)
        self._dashboard_pending = True
        self._open_dashboard()

    @work(thread=True, group="dashboard")
    def _open_dashboard(self) -> None:
        """The hook off the UI thread; its line (the link, or why not) comes back to the chat."""
        try:
            line = self.options.dashboard(self.options.session_dir)
        except Exception as err:  # the hook's own bug: said in the chat, and the next d tries again
            line = f"dashboard: could not start ({type(err).__name__}: {err})"
        if self.is_running:  # not after a quit meanwhile: nothing is left to show the line
            with contextlib.suppress(RuntimeError):  # the app's loop closed between the check and the call
                self.call_from_thread(self._dashboard_answered, line)

    def _dashboard_answered(self, line: str) -> None:
        self._dashboard_pending = False
        self._dashboard_asked = True
        self.say("info", line)

    def _source_of(self, view: IterationView) -> str | None:
        if view.kernel_file is None or self.options.session_dir is None:
            return None
        path = self.options.session_dir / view.kernel_file
        try:
            return path.read_text(encoding="utf-8")
        except OSError as err:
            self.say("warn", f"cannot read {path}: {err.strerror}")
            return None

    def action_diff(self) -> None:
        latest = self.model.latest_kernel()
        if latest is None:
            self.say("warn", "k: no kernel proposed yet")
            return
        best = self.model.previous_best
        if best is None:
            self.say("warn", f"k: no best before #{latest.iteration} to compare it with")
            return
        old, new = self._source_of(self.model.iterations[best]), self._source_of(latest)
        if old is not None and new is not None:
            self.push_screen(DiffScreen(f"#{best} (previous best)", old, f"#{latest.iteration} (latest)", new))

    def action_roofline(self) -> None:
        width, height = self.size
        self.push_screen(RooflineScreen(roofline_view(self.model, width - 4, max(6, height - 16))))

    def action_skills(self) -> None:
        skills = self.query_one("#skills", Static)
        skills.toggle_class("shown")
        if skills.has_class("shown"):
            self._show_skills()

    def _show_skills(self) -> None:
        skills = self.query_one("#skills", Static)
        d = self.model.diagnosis
        if d is None:
            skills.update("skills: no diagnosis yet (s hides)")
            return
        ops = self.model.profile.op_classes_ops if self.model.profile is not None else ()
        query = MatchQuery(op_classes_of(ops), d.bottleneck, d.signals, None, self.model.backend)
        matched = ", ".join(x for x in (d.bottleneck, *d.signals, *query.op_classes) if x)
        lines = [f"Skills for {matched or 'this kernel'} (s hides):"]
        lines += [f"• {m.skill.title} [{m.skill.id}]" for m in match_skills(query, limit=SKILLS_SHOWN)]
        skills.update("\n".join(lines if len(lines) > 1 else [*lines, "no skill matches this diagnosis"]))

    def _writable(self, what: str) -> bool:
        if self.options.read_only:
            self.say("warn", f"replay is read-only: {what} is off")
            return False
        if self.model.phase == "finished" or self.engine_done:
            self.say("warn", f"the session is closed: {what} is off")
            return False
        return True

    def action_pause(self) -> None:
        if not self._writable("pause"):
            return
        if self.controls.is_paused:
            self.controls.resume()
            self.say("info", "▶ resume requested")
        else:
            self.controls.pause()
            self.say("warn", "⏸ pause requested: the loop pauses when this iteration is decided")

    def action_backend(self) -> None:
        if not self._writable("the backend switch"):
            return
        current = self.controls.pending_backend or self.model.backend
        target = "cuda" if current == "triton" else "triton"
        self.controls.switch_backend(target)
        self.model.dirty.add("header")
        self.say("info", f"⇄ backend {current} → {target} from the next iteration")

    def action_steer(self) -> None:
        if self._writable("steering"):
            self.query_one("#steer", Input).focus()

    def action_focus_log(self) -> None:
        self.query_one(ExperimentLog).focus()

    def on_chat_panel_steer(self, message: ChatPanel.Steer) -> None:
        self.query_one(ExperimentLog).focus()
        if not self._writable("steering"):
            return
        try:
            self.controls.steer(message.hint)
        except ConfigError as err:
            self.say("warn", f"steering: {err}")
            return
        self.say("user", f"› you: {message.hint.strip()} (for the next iteration)")

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        view = self.model.iterations.get(int(str(message.row_key.value)))
        if view is None:
            return
        source = self._source_of(view)
        if source is None:
            self.say("warn", f"#{view.iteration}: no kernel source to show")
            return
        self.push_screen(KernelScreen(f"#{view.iteration} · {view.intent or ''} · {view.kernel_file}", source))

    def action_quit_session(self) -> None:
        if self.options.read_only or self.engine_done or self.model.phase == "finished":
            self.controls.stop()  # a replay stops reading
            self.exit(0)
            return
        if self.quitting:
            self.say("warn", "■ still waiting for the current iteration to be decided (ctrl+q quits now)")
            return
        self.quitting = True
        self.controls.stop()
        self.say("warn", "■ stopping: the session closes when the current iteration is decided")
