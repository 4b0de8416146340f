"""The GPU lock: trials share the GPU, timing has it alone, and a waiting timer is not starved."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from openkernel.evaluate.gpu_lock import GpuLock


def _in_thread(action: Callable[[], None]) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def body() -> None:
        action()
        done.set()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, done


def test_evaluations_share_the_gpu_for_trials_but_time_one_at_a_time(tmp_path: Path) -> None:
    first, second, timer = (GpuLock("cuda", tmp_path) for _ in range(3))
    first.shared()
    second.shared()  # a second evaluation checks at the same time
    assert (first.mode, second.mode) == ("shared", "shared")
    _, timed = _in_thread(timer.exclusive)
    assert not timed.wait(0.3)  # timing waits while anyone is still running trials
    first.release()
    assert not timed.wait(0.3)
    second.release()
    assert timed.wait(5)
    assert timer.mode == "exclusive"
    assert timer.waited_s >= 0.5
    timer.release()


def test_a_waiting_timer_keeps_newcomers_out(tmp_path: Path) -> None:
    holder, timer, newcomer = (GpuLock("cuda", tmp_path) for _ in range(3))
    holder.shared()
    _, timed = _in_thread(timer.exclusive)
    time.sleep(0.2)  # the timer is now queued at the turnstile
    _, joined = _in_thread(newcomer.shared)
    assert not joined.wait(0.3)  # without the turnstile, flock would let this sharer in ahead of the timer
    holder.release()
    assert timed.wait(5)
    assert not joined.wait(0.3)  # still out while the timer times
    timer.release()
    assert joined.wait(5)
    newcomer.release()


def test_a_shared_holder_can_take_the_gpu_for_itself(tmp_path: Path) -> None:
    with GpuLock("cuda:0", tmp_path) as lock:
        lock.shared()
        lock.exclusive()
        assert lock.mode == "exclusive"
    assert lock.mode is None
    other = GpuLock("cuda:0", tmp_path)
    other.exclusive()  # released on exit: nobody is left holding it
    assert other.mode == "exclusive"
    other.release()


def test_off_the_gpu_there_is_nothing_to_lock(tmp_path: Path) -> None:
    lock = GpuLock("cpu", tmp_path)
    lock.shared()
    lock.exclusive()
    assert (lock.on_gpu, lock.mode, lock.waited_s) == (False, None, 0.0)
    assert not (tmp_path / "locks").exists()


def test_two_sharers_that_both_queue_to_time_take_turns(tmp_path: Path) -> None:
    first, second = GpuLock("cuda", tmp_path), GpuLock("cuda", tmp_path)
    first.shared()
    second.shared()
    _, a_timed = _in_thread(first.exclusive)
    _, b_timed = _in_thread(second.exclusive)
    assert a_timed.wait(5) or b_timed.wait(5)  # one of them gets it (no deadlock) ...
    winner, loser, loser_done = (first, second, b_timed) if a_timed.is_set() else (second, first, a_timed)
    assert not loser_done.wait(0.3)  # ... and the other waits for its turn
    winner.release()
    assert loser_done.wait(5)
    assert loser.mode == "exclusive"
    loser.release()


def test_an_idle_evaluation_lets_others_time_and_can_take_the_gpu_again(tmp_path: Path) -> None:
    first, other = GpuLock("cuda", tmp_path), GpuLock("cuda", tmp_path)
    first.exclusive()
    first.idle()  # timed; its gates and cleanup need no GPU
    other.exclusive()
    assert (first.mode, other.mode) == (None, "exclusive")
    _, again = _in_thread(first.shared)
    assert not again.wait(0.3)
    other.release()
    assert again.wait(5)
    first.release()
