"""The token gate on the real server (127.0.0.1, a thread), asked with plain http.client; the token file."""

from __future__ import annotations

import http.client
import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_code.dashboard.server import (
    COOKIE,
    DashboardConfig,
    DashboardServer,
    load_or_create_token,
    personal_link,
    token_path,
)
from openkernel.errors import ConfigError
from tests.kernel_code.dashboard.sessions import STEPS, recorded

TOKEN = "t" * 43
ROUTE_BODY = {
    "output": "page.children",
    "outputs": {"id": "page", "property": "children"},
    "inputs": [{"id": "url", "property": "pathname", "value": "/"}],
    "changedPropIds": ["url.pathname"],
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DashboardServer]:
    recorded(tmp_path / "home" / "s1", STEPS[:2])
    running = DashboardServer(DashboardConfig(home=tmp_path / "home", token=TOKEN), "127.0.0.1", 0).start()
    yield running
    running.stop()


def _ask(server: DashboardServer, method: str, path: str, body: object = None, cookie: str | None = None):  # type: ignore[no-untyped-def]
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if cookie is not None:
        headers["Cookie"] = f"{COOKIE}={cookie}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read().decode("utf-8", errors="replace")
    conn.close()
    return response.status, response.getheader("Set-Cookie"), data


def test_every_route_refuses_a_request_without_the_token(server: DashboardServer) -> None:
    status, cookie, page = _ask(server, "GET", f"/?token={TOKEN}")
    assert status == 200
    assert cookie is not None and cookie.startswith(f"{COOKIE}={TOKEN};") and "HttpOnly" in cookie
    asset = re.search(r'src="(/_dash-component-suites/[^"]+\.js)"', page)
    assert asset is not None
    for method, path, body in (
        ("GET", "/", None),
        ("GET", "/session/s1", None),
        ("POST", "/_dash-update-component", ROUTE_BODY),
        ("GET", asset.group(1), None),
        ("GET", "/_dash-layout", None),
        ("GET", "/?token=wrong", None),
    ):
        status, _, text = _ask(server, method, path, body)
        assert (path, status, text) == (
            path,
            403,
            "403 forbidden: open the personal link that `kernel-code dashboard` printed\n",
        )
    assert _ask(server, "GET", asset.group(1), cookie=TOKEN)[0] == 200
    assert _ask(server, "GET", "/", cookie="wrong")[0] == 403
    status, _, reply = _ask(server, "POST", "/_dash-update-component", ROUTE_BODY, cookie=TOKEN)
    assert status == 200
    assert "s1" in reply and "softmax_fp32" in reply  # the sessions page, listing the recorded session


def test_the_token_is_made_once_with_mode_600(tmp_path: Path) -> None:
    path = token_path({"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert path == tmp_path / "cfg" / "kernel-code" / "dashboard-token"
    token = load_or_create_token(path)
    assert len(token) == 43  # token_urlsafe(32)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == token
    path.write_text("short\n")
    with pytest.raises(ConfigError, match="does not hold a dashboard token: delete it"):
        load_or_create_token(path)


def test_the_personal_link_opens_on_the_session() -> None:
    assert personal_link("127.0.0.1", 8050, "abc", "s1") == "http://127.0.0.1:8050/session/s1?token=abc"
    assert personal_link("::1", 9000, "abc", None) == "http://[::1]:9000/?token=abc"


def test_a_taken_port_is_a_config_error(server: DashboardServer, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"cannot listen on 127.0.0.1:{server.port} .*pass another --port"):
        DashboardServer(DashboardConfig(home=tmp_path, token=TOKEN), "127.0.0.1", server.port)
