"""The main screen's looks, as text, in several states, at 80x24 and larger.

Each state's screen is compared with ``snapshots/<name>.txt``. After a deliberate change of looks,
regenerate them with ``UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/kernel_code/tui/test_tui_snapshots.py``
and read the diff of the .txt files before committing it: the files are the review.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kernel_code.tui.app import KernelCodeApp
from openkernel.events import Event
from tests.kernel_code.tui.events import finished, mid_run, started
from tests.kernel_code.tui.pilot import Feed, screen_text, settle

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"

STATES: dict[str, tuple[list[Event], tuple[int, int]]] = {
    # name: (events, terminal size)
    "starting": ([started()], (80, 24)),
    "mid_run_gpu": (mid_run(), (80, 24)),
    "mid_run_cpu": (mid_run(gpu=False), (80, 24)),
    "finished": ([*mid_run()[:-2], finished()], (80, 24)),
    "mid_run_gpu_wide": (mid_run(), (132, 40)),
}


def _screen(events: list[Event], size: tuple[int, int]) -> str:
    feed = Feed()
    app = KernelCodeApp(feed)
    out: list[str] = []

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            feed.push(*events)
            await settle(pilot, lambda: app.events_seen == len(events), "every event")
            # Let the last batch paint: the screen must read the same twice in a row (a loaded machine can
            # take several frames).
            previous = None
            for _ in range(200):
                await pilot.pause(0.05)
                text = screen_text(app)
                if text == previous:
                    break
                previous = text
            else:
                raise AssertionError(f"the screen never settled\n{screen_text(app)}")
            out.append(screen_text(app))

    asyncio.run(main())
    return out[0]


@pytest.mark.parametrize("name", list(STATES))
def test_main_screen_snapshot(name: str) -> None:
    events, size = STATES[name]
    screen = _screen(events, size)
    path = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(screen, encoding="utf-8")
    assert path.exists(), f"no snapshot {path}: run with UPDATE_SNAPSHOTS=1 once, then review the file"
    assert screen == path.read_text(encoding="utf-8")
