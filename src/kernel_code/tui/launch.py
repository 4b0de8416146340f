"""Opening the TUI from the command line: a live session, a resumed one, or a recorded one replayed.

Textual is imported only when a TUI opens, so that ``kernel-code`` commands that print stay quick.
The CLI builds the generator, evaluator and store as for ``--headless`` and hands this module a
factory of the event stream; an error the engine raised inside the TUI is raised again here, after
the terminal is restored, so that the CLI reports it as one line like any other.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from kernel_code.tui import require_terminal
from openkernel.errors import ConfigError
from openkernel.events import Event
from openkernel.loop import Controls
from openkernel.store import DirectoryStore, default_home

__all__ = ["MAX_GAP_S", "add_view_parser", "open_session", "paced", "resolve_session", "run_view"]

DEFAULT_SPEED = 10.0  # a replay runs at this many times the recorded pace
MAX_GAP_S = 5.0  # the longest a replay waits between two events (a recorded pause of hours is not replayed)
_SLICE_S = 0.05  # a waiting replay looks at the controls this often (seconds)


def add_view_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    view: argparse.ArgumentParser = subparsers.add_parser("view", help="replay a recorded session in the TUI")
    view.add_argument("session", help="a session directory, or a session id under the sessions home")
    view.add_argument(
        "--speed", type=float, default=DEFAULT_SPEED, help="times the recorded pace (default 10; 0: all at once)"
    )


def resolve_session(name: str) -> DirectoryStore:
    """A session by directory, or by id under the sessions home; ``StoreError`` when it is neither."""
    path = Path(name)
    return DirectoryStore.open(path if path.is_dir() else default_home() / name)


def paced(
    events: Iterable[Event],
    speed: float,
    controls: Controls,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """``events`` at ``speed`` times the pace their timestamps record (0: at once), until stopped."""
    previous: float | None = None
    for event in events:
        if controls.stop_requested:
            return
        if speed > 0 and previous is not None:
            wait = min(MAX_GAP_S, max(0.0, (event.at_unix_s - previous) / speed))
            while wait > 0 and not controls.stop_requested:
                sleep(min(_SLICE_S, wait))
                wait -= _SLICE_S
            if controls.stop_requested:
                return
        previous = event.at_unix_s
        yield event


def open_session(
    session_dir: Path,
    stream: Callable[[Controls], Iterable[Event]],
    history: Iterable[Event] = (),
    read_only: bool = False,
    trace: bool = False,
) -> int:
    """Run the TUI on ``history`` followed by ``stream(controls)``; the exit code, or the engine's error."""
    require_terminal()
    from kernel_code.dashboard_cmd import tui_hook
    from kernel_code.tui.app import KernelCodeApp, TuiOptions

    recorded = tuple(history)
    app = KernelCodeApp(
        lambda controls: chain(recorded, stream(controls)),
        TuiOptions(session_dir=session_dir, read_only=read_only, trace=trace, dashboard=tui_hook),
    )
    code = app.run()
    if app.engine_error is not None:
        raise app.engine_error
    return code if isinstance(code, int) else 0


def run_view(args: argparse.Namespace) -> int:
    if args.speed < 0:
        raise ConfigError(f"--speed must be 0 (all at once) or more, got {args.speed:g}")
    store = resolve_session(args.session)
    events = store.read_events().events
    return open_session(store.path, lambda controls: paced(events, args.speed, controls), read_only=True)
