"""The dashboard's server: the Dash app factory, the token gate, and a server that runs in a thread.

Every request (pages, the ``_dash-*`` callback routes, assets) must carry the user's token: as
``?token=...`` (the personal link, which then sets an HTTP-only cookie) or as that cookie (what the
page's own later requests send). Anything else is refused with 403 before Dash sees it. The token is
made once per user with ``secrets.token_urlsafe(32)`` and kept, mode 600, beside the user's config.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dash
from dash import dcc, html
from flask import Response, g, request
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from kernel_code.dashboard.data import SessionData, SessionReader
from kernel_code.dashboard.landscape import warm_up
from kernel_code.dashboard.pages import session as session_page
from kernel_code.dashboard.pages import sessions as sessions_page
from kernel_code.dashboard.pages import sweep as sweep_page
from openkernel.errors import ConfigError, StoreError
from openkernel.hardware import Calibration, calibration_for, find_spec, load_calibration
from openkernel.settings import user_config_path

__all__ = [
    "COOKIE",
    "DashboardConfig",
    "DashboardServer",
    "SessionRegistry",
    "create_app",
    "load_or_create_token",
    "personal_link",
    "token_path",
]

COOKIE = "kernel_code_dashboard"
POLL_MS = 2000  # how often an open page asks for new iterations (milliseconds)


def token_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/kernel-code/dashboard-token`` (beside config.toml)."""
    return user_config_path(environ).parent / "dashboard-token"


def load_or_create_token(path: Path) -> str:
    """The user's token from ``path``, made (mode 600) the first time; a broken file is a ``ConfigError``."""
    if path.is_file():
        token = path.read_text(encoding="utf-8").strip()
        if len(token) < 32:
            raise ConfigError(f"{path} does not hold a dashboard token: delete it and a new one is made")
        return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token


def personal_link(host: str, port: int, token: str, session_id: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    page = f"/session/{session_id}" if session_id else "/"
    return f"http://{shown}:{port}{page}?token={token}"


@dataclass(frozen=True)
class DashboardConfig:
    home: Path  # the sessions home: every session under it is listed
    token: str
    sessions: tuple[Path, ...] = ()  # sessions outside the home to list too (`kernel-code dashboard DIR`)
    poll_ms: int = POLL_MS
    cache_dir: Path | None = None  # where calibrations are cached (None: openkernel's default)


@dataclass
class SessionRegistry:
    """The sessions the server may show, each with its incremental reader; shared by all requests."""

    config: DashboardConfig
    _readers: dict[Path, SessionReader] = field(default_factory=dict)
    _calibrations: dict[str, Calibration | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def paths(self) -> dict[str, Path]:
        """Session id (directory name) -> directory: only these can be asked for, so no path comes from a URL."""
        found: dict[str, Path] = {}
        if self.config.home.is_dir():
            for p in sorted(self.config.home.iterdir()):
                if p.is_dir() and (p / "events.jsonl").is_file():
                    found[p.name] = p
        for p in self.config.sessions:
            found[p.name] = p
        return found

    def snapshot(self, session_id: str) -> SessionData | None:
        """The session's data with whatever was appended since the last look; None for an unknown id."""
        path = self.paths().get(session_id)
        if path is None:
            return None
        with self._lock:
            reader = self._readers.get(path)
            if reader is None:
                try:
                    reader = self._readers[path] = SessionReader(path)
                except StoreError:
                    return None
            reader.poll()
            return reader.snapshot()

    def calibration(self, data: SessionData) -> Calibration | None:
        """A cached calibration of the session's GPU (measured ceilings), if this machine has one."""
        label = data.header.hardware_label or data.header.device or ""
        if label not in self._calibrations:
            from openkernel.evaluate.config import default_cache_dir

            cache = self.config.cache_dir or default_cache_dir()
            try:
                spec = find_spec(label)
                found = load_calibration(label, cache) or (calibration_for(spec, cache) if spec else None)
            except ConfigError:
                found = None  # an unreadable cache file: the datasheet ceilings of the result stand
            self._calibrations[label] = found
        return self._calibrations[label]


def create_app(config: DashboardConfig) -> dash.Dash:
    """The Dash app behind the token: a sessions page at ``/``, one page per session at ``/session/<id>``,
    the sweeps at ``/sweeps`` and one page per sweep at ``/sweep/<id>``."""
    warm_up()
    registry = SessionRegistry(config)
    app = dash.Dash(
        __name__,
        title="kernel code dashboard",
        suppress_callback_exceptions=True,  # the session page's components exist only once it is shown
        update_title="",
    )
    _guard(app, config.token)
    app.layout = html.Div([dcc.Location(id="url"), html.Div(id="page")], style={"fontFamily": "sans-serif"})

    @app.callback(dash.Output("page", "children"), dash.Input("url", "pathname"))
    def _route(pathname: str | None) -> object:
        path = pathname or "/"
        if path.startswith("/session/"):
            return session_page.layout(path.removeprefix("/session/").strip("/"), registry)
        if path.startswith("/sweep/"):
            return sweep_page.layout(path.removeprefix("/sweep/").strip("/"), registry)
        if path.rstrip("/") == "/sweeps":
            return sweep_page.list_layout(registry)
        return sessions_page.layout(registry)

    session_page.register_callbacks(app, registry)
    sweep_page.register_callbacks(app, registry)
    return app


def _guard(app: dash.Dash, token: str) -> None:
    """Refuse (403) every request without the token, before any route, and set the cookie from the link."""
    server = app.server

    def _check() -> Response | None:
        from_link = request.args.get("token")
        supplied = from_link or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(supplied.encode(), token.encode()):
            return Response("403 forbidden: open the personal link that `kernel-code dashboard` printed\n", 403)
        g.set_token_cookie = from_link is not None
        return None

    def _cookie(response: Response) -> Response:
        if g.get("set_token_cookie"):
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        return response

    server.before_request(_check)
    server.after_request(_cookie)


_TOKEN_IN_URL = re.compile(r"(token=)[^&\s\"]+")


class _QuietRequests(WSGIRequestHandler):
    """werkzeug's request log, with the token taken out of every URL it writes (the personal link's
    first request carries it), so a log or a redirected stderr never holds the secret."""

    def log(self, type: str, message: str, *args: object) -> None:
        text = message % args if args else message
        super().log(type, "%s", _TOKEN_IN_URL.sub(r"\1<hidden>", text))


class DashboardServer:
    """The app served on ``host:port`` by a thread (port 0: a free one); ``stop()`` shuts it down."""

    def __init__(self, config: DashboardConfig, host: str = "127.0.0.1", port: int = 8050) -> None:
        self.config = config
        self.app = create_app(config)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:  # bound here: werkzeug exits the process when it cannot bind
            listener = socket.create_server((host, port), family=family)
        except OSError as err:
            raise ConfigError(
                f"the dashboard cannot listen on {host}:{port} ({err.strerror}): pass another --port"
            ) from None
        with listener:  # werkzeug takes a duplicate of the bound socket
            self._server: BaseWSGIServer = make_server(
                host, port, self.app.server, threaded=True, fd=listener.fileno(), request_handler=_QuietRequests
            )
        self.host, self.port = host, int(self._server.socket.getsockname()[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="dashboard", daemon=True)

    def start(self) -> DashboardServer:
        self._thread.start()
        return self

    def link(self, session_id: str | None = None) -> str:
        return personal_link(self.host, self.port, self.config.token, session_id)

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
