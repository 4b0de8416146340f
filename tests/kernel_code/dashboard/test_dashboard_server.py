"""The token gate on the real server (127.0.0.1, a thread), asked with plain http.client; the token file."""

from __future__ import annotations

import http.client
import json
import logging
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_code.dashboard.pages.session import TSNE_PENDING
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


def _call(server: DashboardServer, outputs: list[str], inputs: dict[str, object], state: dict[str, object]):  # type: ignore[no-untyped-def]
    """POST one callback as the page does (ids "id.property"); the status and the parsed answer (None: no update)."""

    def props(values: dict[str, object]) -> list[dict[str, object]]:
        return [{"id": k.split(".")[0], "property": k.split(".")[1], "value": v} for k, v in values.items()]

    targets = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in outputs]
    body = {
        "output": f"..{'...'.join(outputs)}.." if len(outputs) > 1 else outputs[0],
        "outputs": targets if len(outputs) > 1 else targets[0],
        "inputs": props(inputs),
        "state": props(state),
        "changedPropIds": list(inputs),
    }
    status, _, reply = _ask(server, "POST", "/_dash-update-component", body, cookie=TOKEN)
    return status, json.loads(reply) if reply else None


def _component(tree: object, component_id: str) -> dict[str, object] | None:
    """The component ``component_id`` in a Dash layout as JSON."""
    if isinstance(tree, list):
        return next((c for t in tree if (c := _component(t, component_id)) is not None), None)
    if isinstance(tree, dict):
        props = tree.get("props", {})
        if props.get("id") == component_id:
            return props  # type: ignore[no-any-return]
        return _component(props.get("children"), component_id)
    return None


def test_the_session_page_draws_every_panel_but_t_sne_first_and_t_sne_after(server: DashboardServer) -> None:
    status, page = _call(server, ["page.children"], {"url.pathname": "/session/s1"}, {})
    assert status == 200
    tsne = _component(page["response"]["page"]["children"], "session-tsne")
    assert tsne is not None
    assert [a["text"] for a in tsne["figure"]["layout"]["annotations"]] == [TSNE_PENDING]  # type: ignore[index]
    refresh = [
        "session-title.children",
        "session-summary.children",
        "session-trajectory.figure",
        "session-roofline.figure",
        "session-table.rowData",
        "session-diff-a.options",
        "session-diff-b.options",
        "session-landscape-3d.figure",
        "session-version.data",
    ]
    state = {"session-id.data": "s1", "session-version.data": -1}
    status, answer = _call(server, refresh, {"session-interval.n_intervals": None}, state)
    assert status == 200
    assert sorted(answer["response"]) == sorted(o.split(".")[0] for o in refresh)  # no t-SNE: it comes after
    version = answer["response"]["session-version"]["data"]
    session = {"session-id.data": "s1"}
    # the page's own first call, before the refresh answered: no update, the placeholder stays
    assert _call(server, ["session-tsne.figure"], {"session-version.data": -1}, session) == (204, None)
    status, answer = _call(server, ["session-tsne.figure"], {"session-version.data": version}, session)
    assert status == 200
    assert [a["text"] for a in answer["response"]["session-tsne"]["figure"]["layout"]["annotations"]] == [
        "t-SNE needs at least 5 timed kernels; this session has 2 so far"
    ]


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


def test_the_request_log_never_holds_the_token(server: DashboardServer, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="werkzeug"):
        status, _, _ = _ask(server, "GET", f"/session/s1?token={TOKEN}")
        refused, _, _ = _ask(server, "GET", f"/?token={TOKEN}x&other=1")
    assert (status, refused) == (200, 403)
    lines = [r.getMessage() for r in caplog.records if r.name == "werkzeug"]
    assert len(lines) == 2
    assert all(TOKEN not in line for line in lines)
    assert '"GET /session/s1?token=<hidden> HTTP/1.1" 200' in lines[0]
    assert "GET /?token=<hidden>&other=1 HTTP/1.1" in lines[1] and lines[1].endswith(" 403 -")  # (in colour)
