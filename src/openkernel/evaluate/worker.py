"""Worker process entry point: ``python -m openkernel.evaluate.worker {reference|candidate}``.

The *reference* worker imports the problem, makes inputs from seeds the parent chose, computes
the expected outputs, traces the reference's aten ops and times the baseline. The *candidate*
worker imports the candidate, receives each trial's seeds (and each timed call's noise seed)
only when it is due, runs, times and sends back its outputs. Neither decides anything: every
frame goes to the parent, which compares and judges. Any exception becomes an ``error`` frame
with the stage it happened in; the process then exits.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import traceback
from typing import Any

# harness must be imported before any candidate code: it captures the functions it relies on.
from openkernel.evaluate import harness as _harness  # noqa: F401
from openkernel.evaluate.channel import Channel
from openkernel.evaluate.worker_candidate import run_candidate
from openkernel.evaluate.worker_common import StageError
from openkernel.evaluate.worker_reference import run_reference

_ERROR_TAIL = 4000
# Debugging the harness's own speed: a folder where each worker writes ``<role>-<pid>.pstats``.
PROFILE_VAR = "OPENKERNEL_PROFILE_WORKERS"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _error_frame(stage: str, exc: BaseException) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(exc))
    return {
        "kind": "error",
        "stage": stage,
        "error_type": type(exc).__name__,
        "error_module": type(exc).__module__,
        "message": str(exc)[:_ERROR_TAIL],
        "traceback": tb[-_ERROR_TAIL:],
        "in_triton": "triton" in tb and ("/triton/" in tb or "triton." in type(exc).__module__),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="openkernel.evaluate.worker")
    parser.add_argument("role", choices=["reference", "candidate"])
    parser.add_argument("--rfd", type=int, required=True)
    parser.add_argument("--wfd", type=int, required=True)
    parser.add_argument("--parent", type=int, default=0, help="the trusted parent's pid: die with it")
    args = parser.parse_args(argv)
    if args.parent:
        _die_with_parent(args.parent)
    secret = Channel.read_secret(args.rfd)
    ch = Channel(args.rfd, args.wfd, secret)
    job = ch.recv().header
    folder = os.environ.get(PROFILE_VAR)
    if not folder:
        return _run(args.role, ch, job)
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return _run(args.role, ch, job)
    finally:
        profiler.disable()
        profiler.dump_stats(os.path.join(folder, f"{args.role}-{os.getpid()}.pstats"))


def _die_with_parent(parent: int) -> None:
    """Linux: be killed the moment the trusted parent dies (a killed Ray worker, a closed terminal), not
    only at the next read of the channel, which a long build or a hung import may never reach."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the channel's end-of-file still ends this worker
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _run(role: str, ch: Channel, job: dict[str, Any]) -> int:
    try:
        if role == "reference":
            run_reference(ch, job)
        else:
            run_candidate(ch, job)
    except StageError as err:
        ch.send(_error_frame(err.stage, err.exc))
        return 1
    except BaseException as exc:
        ch.send(_error_frame("harness", exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
