"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright, on the real server.

Screenshots go to ``test-artifacts/dashboard/`` (gitignored) for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_code.dashboard.server import DashboardConfig, DashboardServer
from tests.conftest import ROOT
from tests.kernel_code.dashboard.sessions import STEPS, recorded, write_profile
from tests.trace_sessions import Step

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
TOKEN = "k" * 43
TSNE_POINTS = "document.querySelectorAll('#session-tsne .scatterlayer .point').length === {n}"
POINTS = "document.querySelectorAll('#session-trajectory .scatterlayer .trace .point').length === {n}"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason="needs Debian's Chromium: apt-get update && apt-get install -y chromium"
)
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[test]'")

EXTRA = Step("import torch\nBLOCK_SIZE = 8192\nnum_warps = 8\n", "two-pass fused", runtime_ms=0.25)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[DashboardServer, Path, bytes]]:
    """A server on a session that has 7 iterations; the bytes that add an 8th (appended by a test)."""
    session = recorded(tmp_path / "home" / "s1", [*STEPS, EXTRA])
    lines = (session / "events.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(
        i for i, line in enumerate(lines) if b'"kind": "iteration_started"' in line and b'"iteration": 7,' in line
    )
    (session / "events.jsonl").write_bytes(b"".join(lines[:cut]))  # the 8th iteration is still to come
    write_profile(session, 5)
    config = DashboardConfig(home=tmp_path / "home", token=TOKEN, poll_ms=500)
    server = DashboardServer(config, "127.0.0.1", 0).start()
    yield server, session, b"".join(lines[cut:])
    server.stop()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        yield context.new_page()
        context.close()
        browser.close()


def _cells(page: object, column: str) -> list[str]:
    cells = page.locator(f"#session-table .ag-center-cols-container .ag-row .ag-cell[col-id='{column}']")  # type: ignore[attr-defined]
    rows = page.locator("#session-table .ag-center-cols-container .ag-row")  # type: ignore[attr-defined]
    order = [int(rows.nth(i).get_attribute("aria-rowindex")) for i in range(rows.count())]
    texts = [cells.nth(i).inner_text() for i in range(cells.count())]
    return [t for _, t in sorted(zip(order, texts, strict=True))]


def test_every_panel_renders_the_table_filters_and_sorts_and_new_iterations_appear(
    live: tuple[DashboardServer, Path, bytes], page: object
) -> None:
    server, session, more = live
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pw = page  # type: ignore[assignment]
    response = pw.goto(server.link("s1"))  # type: ignore[attr-defined]
    assert response.status == 200
    pw.wait_for_selector("#session-table .ag-row", timeout=30_000)  # type: ignore[attr-defined]
    assert pw.locator("#session-title").inner_text() == "softmax_fp32 · s1"  # type: ignore[attr-defined]
    # The figures draw once plotly.js has loaded, which can be after the table (a cold first page).
    pw.wait_for_function(POINTS.format(n=7), timeout=30_000)  # type: ignore[attr-defined]
    pw.wait_for_selector("#session-utilisation .indicatorlayer .trace", timeout=30_000)  # type: ignore[attr-defined]
    # 1 trajectory: 7 iterations as points (3 keep, 2 discard, 2 error) and the best-so-far line
    assert pw.locator("#session-trajectory .scatterlayer .trace .point").count() == 7  # type: ignore[attr-defined]
    legend = pw.locator("#session-trajectory .legendtext").all_text_contents()  # type: ignore[attr-defined]
    assert legend == ["keep", "discard", "error", "best so far"]
    # 2 roofline: the ceiling, the reference and 5 timed kernels
    roof = pw.locator("#session-roofline .legendtext").all_text_contents()  # type: ignore[attr-defined]
    assert roof[1:] == ["reference", "kernels: keep", "kernels: discard"]
    assert roof[0].startswith("NVIDIA H200: 4 TB/s (datasheet)")
    # 3 utilisation gauges from profiles/iter_0005.json
    gauges = pw.locator("#session-utilisation .indicatorlayer .trace")  # type: ignore[attr-defined]
    assert gauges.count() == 6
    assert "71.5%" in pw.locator("#session-utilisation").text_content()  # type: ignore[attr-defined]
    # 4 the table: 7 rows, quick search, sort by speedup
    assert _cells(pw, "iteration") == ["0", "1", "2", "3", "4", "5", "6"]
    pw.fill("#session-search", "rows")  # type: ignore[attr-defined]
    pw.wait_for_function("document.querySelectorAll('#session-table .ag-center-cols-container .ag-row').length === 2")  # type: ignore[attr-defined]
    assert sorted(_cells(pw, "intent")) == ["persistent rows", "two rows per program"]
    pw.fill("#session-search", "")  # type: ignore[attr-defined]
    pw.click("#session-table .ag-header-cell[col-id='speedup'] .ag-header-cell-label")  # type: ignore[attr-defined]
    pw.wait_for_timeout(500)  # type: ignore[attr-defined]
    assert _cells(pw, "speedup")[2:] == ["2", "2.5", "3.3333", "4", "5"]  # ascending, the untimed first
    # 5 code diff of iterations 0 and 1
    for box, choice in (("#session-diff-a", "0: 2.000x"), ("#session-diff-b", "1: 4.000x")):
        pw.click(box)  # type: ignore[attr-defined]
        pw.get_by_text(choice).first.click()  # type: ignore[attr-defined]
    pw.wait_for_selector("#session-diff tr.diff-changed")  # type: ignore[attr-defined]
    diff_text = pw.locator("#session-diff").inner_text()  # type: ignore[attr-defined]
    assert "iteration 0 · correct · keep · 2.000x · 1 ms" in diff_text
    assert "BLOCK_SIZE = 1024" in diff_text and "BLOCK_SIZE = 256" in diff_text
    # 6 landscape: the 3D scatter and the t-SNE map of the 5 timed kernels (its own callback, after the refresh)
    assert "Optimisation landscape (3D)" in pw.locator("#session-landscape-3d .gtitle").text_content()  # type: ignore[attr-defined]
    pw.wait_for_function(TSNE_POINTS.format(n=5), timeout=30_000)  # type: ignore[attr-defined]
    assert pw.locator("#session-tsne .scatterlayer .point").count() == 5  # type: ignore[attr-defined]
    assert "t-SNE" in pw.locator("#session-tsne .gtitle").text_content()  # type: ignore[attr-defined]
    # 7 memory heatmap, on demand
    pw.click("#session-heatmap-load")  # type: ignore[attr-defined]
    pw.wait_for_selector("#session-heatmap-graph .heatmaplayer")  # type: ignore[attr-defined]
    pw.screenshot(path=str(ARTIFACTS / "session.png"), full_page=True)  # type: ignore[attr-defined]
    # live: an 8th iteration appended to events.jsonl shows up without a reload
    with open(session / "events.jsonl", "ab") as f:
        f.write(more)
    pw.wait_for_function(  # type: ignore[attr-defined]
        "document.querySelectorAll('#session-table .ag-center-cols-container .ag-row').length === 8", timeout=15_000
    )
    pw.wait_for_function(POINTS.format(n=8), timeout=15_000)  # type: ignore[attr-defined]
    assert pw.locator("#session-trajectory .scatterlayer .trace .point").count() == 8  # type: ignore[attr-defined]
    # the 8th kernel is timed too: the t-SNE callback maps 6
    pw.wait_for_function(TSNE_POINTS.format(n=6), timeout=30_000)  # type: ignore[attr-defined]
    pw.screenshot(path=str(ARTIFACTS / "session-live.png"), full_page=True)  # type: ignore[attr-defined]


def test_the_sessions_page_lists_the_session_and_a_page_without_the_token_is_refused(
    live: tuple[DashboardServer, Path, bytes], page: object
) -> None:
    server, _, _ = live
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pw = page  # type: ignore[assignment]
    refused = pw.goto(f"http://127.0.0.1:{server.port}/session/s1")  # type: ignore[attr-defined]
    assert refused.status == 403
    assert "403 forbidden" in pw.inner_text("body")  # type: ignore[attr-defined]
    pw.screenshot(path=str(ARTIFACTS / "refused.png"))  # type: ignore[attr-defined]
    assert pw.goto(server.link()).status == 200  # type: ignore[attr-defined]
    pw.wait_for_selector("#sessions-table tbody tr")  # type: ignore[attr-defined]
    row = pw.locator("#sessions-table tbody tr").first.inner_text()  # type: ignore[attr-defined]
    assert row.split("\t")[:7] == ["s1", "softmax_fp32", "NVIDIA H200", "triton", "openai:gpt-test", "5.000x", "7"]
    pw.screenshot(path=str(ARTIFACTS / "sessions.png"))  # type: ignore[attr-defined]
