"""The sweep pages: figures as pure functions of a sweep's summary, the page's table and links, and the
token gate in front of them on the real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_code.dashboard.pages.sweep import TABLE_COLUMNS, fast_p_figure, layout, list_layout, speedup_figure
from kernel_code.dashboard.server import DashboardConfig, DashboardServer, SessionRegistry
from openkernel.sweeps import SweepFinished, SweepRecord, summarise
from tests.kernel_code.dashboard.sessions import STEPS, recorded
from tests.kernel_code.dashboard.test_dashboard_server import TOKEN, _ask
from tests.sweep_records import RAISED, SWEEP_ID, write_record


def _texts(tree: object) -> list[str]:
    """Every string in a Dash layout, depth first (a link counts as its text)."""
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, list | tuple):
        return [t for child in tree for t in _texts(child)]
    children = getattr(tree, "children", None)
    return _texts(children) if children is not None else []


def _rows(page: object, table_id: str) -> list[list[str]]:
    table = _find(page, table_id)
    body = table.children[1]  # type: ignore[attr-defined]
    return [[" ".join(_texts(cell.children)) for cell in row.children] for row in body.children]


def _find(tree: object, component_id: str) -> object:
    if getattr(tree, "id", None) == component_id:
        return tree
    children = getattr(tree, "children", None)
    for child in children if isinstance(children, list | tuple) else [children] if children is not None else []:
        found = _find(child, component_id)
        if found is not None:
            return found
    return None


def test_fast_p_and_speedup_figures_of_a_summary(tmp_path: Path) -> None:
    summary = summarise(write_record(tmp_path))
    fast = fast_p_figure(summary)
    assert (list(fast.data[0].x), list(fast.data[0].text)) == (
        ["fast_0", "fast_1", "fast_1.5", "fast_2"],
        ["0.67", "0.67", "0.33", "0.33"],
    )
    bars = speedup_figure(summary)
    assert (list(bars.data[0].x), list(bars.data[0].y), list(bars.data[0].text)) == (
        ["softmax_fp32", "row_sum_fp32"],
        [2.5, 1.2],
        ["2.50x", "1.20x"],
    )
    assert bars.layout.title.text == "best speedup per problem"  # GPU timings: no cpu* note


def test_the_sweep_page_lists_each_problem_with_a_link_to_its_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    recorded(home / "s-softmax_fp32-1", STEPS[:2])  # one of the sweep's sessions is on disk
    write_record(home)
    registry = SessionRegistry(DashboardConfig(home=home, token=TOKEN))
    page = layout(SWEEP_ID, registry)
    header = _find(page, "sweep-table").children[0].children  # type: ignore[attr-defined]
    assert _texts(header) == list(TABLE_COLUMNS)
    spent = "iteration budget spent (5 of 5)"
    assert _rows(page, "sweep-table") == [
        ["softmax_fp32", "finished", "2.50x", "5", "1", "$0.0100", "s-softmax_fp32-1", spent],
        ["row_sum_fp32", "finished", "1.20x", "5", "2", "price unknown", "s-row_sum_fp32-2", spent],
        ["log_softmax_fp32", "failed", "—", "—", "1", "—", "s-log_softmax_fp32-1", f"raised: {RAISED}"],
    ]
    links = [c for c in _cells(page) if type(c).__name__ == "Link"]
    assert [link.href for link in links] == ["/session/s-softmax_fp32-1"]  # type: ignore[attr-defined]  # known ones only
    measures = " ".join(_texts(_find(page, "sweep-measures")))
    assert measures.startswith("finished · fast_0 0.67 (2/3) · fast_1 0.67 (2/3)")
    listing = list_layout(registry)
    assert _rows(listing, "sweeps-table")[0][:3] == [SWEEP_ID, "2/3 finished", "finished"]
    assert _texts(layout("../../etc", registry))[0] == "no such sweep"


def _cells(page: object) -> list[object]:
    rows = _find(page, "sweep-table").children[1].children  # type: ignore[attr-defined]
    return [cell.children for row in rows for cell in row.children]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DashboardServer]:
    write_record(tmp_path / "home")
    running = DashboardServer(DashboardConfig(home=tmp_path / "home", token=TOKEN), "127.0.0.1", 0).start()
    yield running
    running.stop()


def test_the_sweep_pages_are_behind_the_token(server: DashboardServer) -> None:
    body = {
        "output": "page.children",
        "outputs": {"id": "page", "property": "children"},
        "inputs": [{"id": "url", "property": "pathname", "value": f"/sweep/{SWEEP_ID}"}],
        "changedPropIds": ["url.pathname"],
    }
    for path in (f"/sweep/{SWEEP_ID}", "/sweeps"):
        assert _ask(server, "GET", path)[0] == 403
    assert _ask(server, "POST", "/_dash-update-component", body)[0] == 403
    status, _, reply = _ask(server, "POST", "/_dash-update-component", body, cookie=TOKEN)
    assert status == 200
    page = json.loads(reply)["response"]["page"]["children"]
    assert f"kernel code · sweep {SWEEP_ID}" in _json_texts(page)


def _json_texts(tree: object) -> list[str]:
    """Every string child in a layout as Dash sends it (JSON)."""
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, list):
        return [t for child in tree for t in _json_texts(child)]
    if isinstance(tree, dict):
        return _json_texts(tree.get("props", {}).get("children"))
    return []


def test_a_running_sweeps_page_redraws_until_the_sweep_is_complete(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = write_record(home, complete=False)
    running = DashboardServer(DashboardConfig(home=home, token=TOKEN), "127.0.0.1", 0).start()
    try:
        page = layout(SWEEP_ID, SessionRegistry(DashboardConfig(home=home, token=TOKEN)))
        assert _find(page, "sweep-tick").disabled is False  # type: ignore[attr-defined]
        body = {
            "output": "..sweep-body.children...sweep-tick.disabled..",
            "outputs": [{"id": "sweep-body", "property": "children"}, {"id": "sweep-tick", "property": "disabled"}],
            "inputs": [{"id": "sweep-tick", "property": "n_intervals", "value": 1}],
            "state": [{"id": "sweep-id", "property": "data", "value": SWEEP_ID}],
            "changedPropIds": ["sweep-tick.n_intervals"],
        }
        status, _, reply = _ask(running, "POST", "/_dash-update-component", body, cookie=TOKEN)
        answer = json.loads(reply)["response"]
        assert status == 200 and answer["sweep-tick"]["disabled"] is False
        assert any(t.startswith("running, or stopped") for t in _json_texts(answer["sweep-body"]["children"]))
        SweepRecord(folder).append(SweepFinished(SWEEP_ID, 7.0, 2, 1))  # the driver writes its last line
        status, _, reply = _ask(running, "POST", "/_dash-update-component", body, cookie=TOKEN)
        answer = json.loads(reply)["response"]
        assert status == 200 and answer["sweep-tick"]["disabled"] is True  # finished: the page stops asking
        assert any(t.startswith("finished · fast_0 0.67 (2/3)") for t in _json_texts(answer["sweep-body"]["children"]))
    finally:
        running.stop()
