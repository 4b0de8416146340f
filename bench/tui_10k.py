"""The TUI with a session of 10,000 iterations: does it stay responsive?

Feeds synthetic events (``tests/kernel_code/tui/events.py``: keeps, discards, errors, streamed text,
usage, diagnoses; about 80,000 events) first through the session model alone, then through the app
running headless under Textual's Pilot at 120x40, and prints:

- the model's time per event (the cost of folding, with no drawing);
- the app's total time until every event is on screen, and its time per event;
- the longest single drain (events folded + panels repainted in one timer tick): the longest the UI
  is busy at once, which is what a user feels as lag;
- how long a key (``r``: the roofline over every kernel) takes to open and close at the end.

    .venv/bin/python bench/tui_10k.py [--iterations 10000]

No pass/fail: the numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from kernel_code.tui.app import KernelCodeApp  # noqa: E402
from kernel_code.tui.screens import RooflineScreen  # noqa: E402
from kernel_code.tui.state import SessionModel  # noqa: E402
from tests.kernel_code.tui.events import synthetic  # noqa: E402
from tests.kernel_code.tui.pilot import Feed  # noqa: E402


def bench_model(iterations: int) -> tuple[int, float]:
    events = list(synthetic(iterations))
    model = SessionModel()
    start = time.perf_counter()
    for event in events:
        model.apply(event)
    return len(events), time.perf_counter() - start


async def bench_app(iterations: int) -> dict[str, float]:
    events = list(synthetic(iterations))
    feed = Feed()
    app = KernelCodeApp(feed)
    drains: list[float] = []
    original = app.drain

    def timed_drain() -> None:
        start = time.perf_counter()
        original()
        drains.append(time.perf_counter() - start)

    app.drain = timed_drain  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        start = time.perf_counter()
        feed.push(*events)
        while app.events_seen < len(events):
            await pilot.pause(0.01)
        await pilot.pause()
        total = time.perf_counter() - start
        key_start = time.perf_counter()
        await pilot.press("r")
        while not isinstance(app.screen, RooflineScreen):
            await pilot.pause(0.01)
        await pilot.press("escape")
        key = time.perf_counter() - key_start
        rows = app.query_one("#log").row_count  # type: ignore[attr-defined]
    busy = [d for d in drains if d > 0.001]
    return {
        "events": len(events),
        "total_s": total,
        "per_event_us": total / len(events) * 1e6,
        "longest_drain_ms": max(drains) * 1e3,
        "median_busy_drain_ms": statistics.median(busy) * 1e3 if busy else 0.0,
        "busy_drains": len(busy),
        "roofline_key_ms": key * 1e3,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000)
    args = parser.parse_args()
    n, seconds = bench_model(args.iterations)
    print(f"model: {n:,} events in {seconds:.3f} s = {seconds / n * 1e6:.1f} us/event")
    r = asyncio.run(bench_app(args.iterations))
    print(
        f"app (120x40, headless): {r['events']:,} events on screen in {r['total_s']:.2f} s = "
        f"{r['per_event_us']:.1f} us/event; {r['rows']:,} log rows"
    )
    print(
        f"longest drain (UI busy at once): {r['longest_drain_ms']:.0f} ms; median busy drain "
        f"{r['median_busy_drain_ms']:.1f} ms over {r['busy_drains']} drains"
    )
    print(f"r (roofline of every kernel) opened and closed in {r['roofline_key_ms']:.0f} ms")


if __name__ == "__main__":
    main()
