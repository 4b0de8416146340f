"""``kernel-code dashboard [SESSION]``: serve the web dashboard and print the personal link.

Also the TUI's ``d`` key: :func:`tui_hook` starts one dashboard server in a background thread the
first time and answers the link to the session on screen. Dash is imported only here, when asked; the
TUI calls the hook from a worker thread, since that import and the server's start take ~2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_code.tui.launch import resolve_session
from openkernel.errors import OpenKernelError
from openkernel.settings import load_settings
from openkernel.store import default_home

if TYPE_CHECKING:
    from kernel_code.dashboard.server import DashboardServer

__all__ = ["add_parser", "run", "tui_hook"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a whole number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 0 and 65535, got {value}")
    return value


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser("dashboard", help="open the web dashboard (live, behind a personal link)")
    parser.add_argument("session", nargs="?", help="a session directory or id to open on (default: the list)")
    parser.add_argument("--host", default=None, help="address to listen on (default: [dashboard] host, 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=None, help="port (default: [dashboard] port, 8050; 0: any)")
    parser.add_argument("--no-browser", action="store_true", help="print the link only; do not open a browser")


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or sys.platform in ("darwin", "win32")


def _server(session_dir: Path | None, host: str, port: int) -> DashboardServer:
    from kernel_code.dashboard.server import DashboardConfig, DashboardServer, load_or_create_token, token_path

    config = DashboardConfig(
        home=default_home(),
        token=load_or_create_token(token_path()),
        sessions=(session_dir,) if session_dir is not None else (),
    )
    return DashboardServer(config, host, port)


def run(args: argparse.Namespace) -> int:
    settings = load_settings().dashboard
    session_dir = resolve_session(args.session).path if args.session else None
    server = _server(session_dir, args.host or settings.host, settings.port if args.port is None else args.port)
    link = server.link(session_dir.name if session_dir else None)
    print(f"kernel code dashboard: {link}", flush=True)
    print("keep this link private: it carries your dashboard token. ctrl+c stops the server.", flush=True)
    if not args.no_browser and _has_display():
        webbrowser.open(link)
    with contextlib.suppress(KeyboardInterrupt):  # ctrl+c is how the user stops it
        server.serve_forever()
    return 0


_running: dict[str, DashboardServer] = {}  # "server": the one the TUI started, once
_lock = threading.Lock()


def tui_hook(session_dir: Path | None) -> str:
    """The TUI's ``d``: start the dashboard once (a daemon thread) and answer the link, or why it could not."""
    with _lock:
        try:
            if "server" not in _running:
                settings = load_settings().dashboard
                try:
                    _running["server"] = _server(session_dir, settings.host, settings.port).start()
                except OpenKernelError:  # the configured port is taken: any free one will do
                    _running["server"] = _server(session_dir, settings.host, 0).start()
        except OpenKernelError as err:
            return f"dashboard: could not start ({err})"
        server = _running["server"]
        if session_dir is not None and session_dir not in server.config.sessions:
            return f"dashboard: {server.link()} (this session is not listed there: run `kernel-code dashboard`)"
        return f"dashboard: {server.link(session_dir.name if session_dir else None)}"
