"""The session store: append-only and fsynced, torn last lines tolerated, resume after a real SIGKILL."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from openkernel.errors import InternalError
from openkernel.events import (
    Decision,
    DecisionKind,
    EvaluationFinished,
    Event,
    GeneratorDelta,
    IterationStarted,
    KernelProposed,
    Resumed,
    SessionConfig,
    SessionFinished,
    SessionStarted,
)
from openkernel.store import (
    DirectoryStore,
    MemoryStore,
    ReadResult,
    ResumePoint,
    SessionSummary,
    StoreError,
    default_home,
    list_sessions,
)

CONFIG = SessionConfig("triton", "offline", "small", 10, 600.0, None, None)
SHA = "0" * 64


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DirectoryStore:
    monkeypatch.setattr("openkernel.store.secrets.token_hex", lambda n: "beef")
    return DirectoryStore.create(tmp_path / "home", "L1#23", CONFIG)


def _iteration(sid: str, i: int, decision: DecisionKind | None, speedup: float | None, best: int | None) -> list[Event]:
    events: list[Event] = [
        IterationStarted(sid, 10.0 + i, i, f"idea {i}"),
        KernelProposed(sid, 10.1 + i, i, f"kernels/iter_{i:04d}.py", f"idea {i}", SHA),
    ]
    if decision is not None:
        events.append(Decision(sid, 10.2 + i, i, decision, "r", speedup, best))
    return events


def test_create_lays_out_the_directory(store: DirectoryStore, tmp_path: Path) -> None:
    assert store.created_at_unix_s is not None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(store.created_at_unix_s))
    assert store.session_id == f"{stamp}-L1_23-beef"
    assert store.path == tmp_path / "home" / store.session_id
    assert sorted(p.name for p in store.path.iterdir()) == ["config.json", "events.jsonl", "kernels"]
    assert json.loads((store.path / "config.json").read_text()) == {
        "schema_version": 2,
        "session_id": store.session_id,
        "problem_name": "L1#23",
        "created_at_unix_s": store.created_at_unix_s,
        "config": {
            "backend": "triton",
            "model": "offline",
            "size": "small",
            "max_iterations": 10,
            "wall_time_budget_s": 600.0,
            "token_budget": None,
            "cost_budget_usd": None,
        },
    }
    opened = DirectoryStore.open(store.path)
    assert (opened.session_id, opened.problem_name, opened.config, opened.created_at_unix_s) == (
        store.session_id,
        "L1#23",
        CONFIG,
        store.created_at_unix_s,
    )
    assert opened.read_events() == ReadResult((), None)


def test_open_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as info:
        DirectoryStore.open(tmp_path / "nope")
    assert str(info.value) == f"no session at {tmp_path / 'nope'}: list them with `kernel-code sessions`"
    with pytest.raises(StoreError) as info:
        DirectoryStore.open(tmp_path)
    assert str(info.value) == f"{tmp_path} is not a kernel-code session: it has no events.jsonl"


def test_append_only_fsynced_and_read_back(store: DirectoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync
    calls: list[int] = []

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    sid = store.session_id
    events: list[Event] = [
        SessionStarted(sid, 1.0, "L1#23", "/p.py", "triton", "offline", "cpu", "NVIDIA H200", CONFIG),
        GeneratorDelta(sid, 1.5, 0, "héllo\n\tworld"),
        *_iteration(sid, 0, "keep", 1.5, 0),
        *_iteration(sid, 1, "discard", 0.5, 0),
    ]
    snapshots: list[bytes] = []
    for event in events:
        store.append(event)
        snapshots.append((store.path / "events.jsonl").read_bytes())
    assert len(calls) == len(events)
    for earlier, later in itertools.pairwise(snapshots):
        assert len(later) > len(earlier)
        assert later[: len(earlier)] == earlier
    assert snapshots[-1].count(b"\n") == len(events)
    assert DirectoryStore.open(store.path).read_events() == ReadResult(tuple(events), None)


def test_append_refuses_another_sessions_event(store: DirectoryStore) -> None:
    with pytest.raises(InternalError) as info:
        store.append(GeneratorDelta("other", 1.0, 0, "x"))
    assert str(info.value) == (
        f"event of session 'other' appended to session {store.session_id!r} "
        "(this is a bug in openkernel; please report it with the command you ran)"
    )


def test_torn_last_line_is_tolerated_then_closed_by_resumed(store: DirectoryStore) -> None:
    sid = store.session_id
    first = _iteration(sid, 0, "keep", 1.5, 0)
    for event in first:
        store.append(event)
    torn = '{"schema_version": 1, "kind": "iteration_started", "session_id": "' + sid + '", "at_'
    with open(store.path / "events.jsonl", "ab") as f:
        f.write(torn.encode())
    before = (store.path / "events.jsonl").read_bytes()
    assert store.read_events() == ReadResult(tuple(first), torn)

    with pytest.raises(StoreError) as info:
        store.append(IterationStarted(sid, 20.0, 1, None))
    assert str(info.value) == (
        f"{store.path / 'events.jsonl'} ends with a torn line: append a Resumed event whose torn_line is "
        "ReadResult.torn_line first (resuming the session does this)"
    )
    resumed = Resumed(sid, 21.0, 1, "resumed after the process was killed: iteration 1 is redone", torn)
    store.append(resumed)
    store.append(IterationStarted(sid, 22.0, 1, None))
    after = (store.path / "events.jsonl").read_bytes()
    assert after[: len(before)] == before
    assert store.read_events() == ReadResult((*first, resumed, IterationStarted(sid, 22.0, 1, None)), None)


def test_torn_line_with_half_a_utf8_character(store: DirectoryStore) -> None:
    with open(store.path / "events.jsonl", "ab") as f:
        f.write('{"text": "é'.encode()[:-1])
    assert store.read_events() == ReadResult((), '{"text": "\ufffd')


def test_malformed_middle_line_names_its_line(store: DirectoryStore) -> None:
    sid = store.session_id
    store.append(IterationStarted(sid, 1.0, 0, None))
    with open(store.path / "events.jsonl", "ab") as f:
        f.write(b'{"schema_version": 1, "kind": "decision"}\n')
    store.append(IterationStarted(sid, 2.0, 1, None))
    with pytest.raises(StoreError) as info:
        store.read_events()
    assert str(info.value) == (
        f"{store.path / 'events.jsonl'} line 2: a 'decision' event is missing fields 'session_id', 'at_unix_s', "
        "'iteration', 'decision', 'reason', 'speedup', 'best_iteration'"
    )
    with open(store.path / "events.jsonl", "ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(StoreError) as info:
        DirectoryStore.open(store.path).resume_point()
    assert str(info.value).startswith(f"{store.path / 'events.jsonl'} line 2: ")


def test_resume_point(store: DirectoryStore) -> None:
    sid = store.session_id
    assert store.resume_point() == ResumePoint(0, (), None, None, False)
    for event in [
        *_iteration(sid, 0, "keep", 1.2, 0),
        *_iteration(sid, 1, "error", None, 0),
        *_iteration(sid, 2, "keep", 1.9, 2),
    ]:
        store.append(event)
    assert store.resume_point() == ResumePoint(3, (0, 1, 2), None, 2, False)
    for event in _iteration(sid, 3, None, None, None):
        store.append(event)
    assert store.resume_point() == ResumePoint(3, (0, 1, 2), 3, 2, False)
    store.append(SessionFinished(sid, 30.0, "stopped by the user", 2, 1.9, 3))
    assert store.resume_point() == ResumePoint(3, (0, 1, 2), 3, 2, True)
    store.append(Resumed(sid, 31.0, 3, "resumed by the user", None))
    assert store.resume_point() == ResumePoint(3, (0, 1, 2), 3, 2, False)


def test_write_kernel_never_overwrites(store: DirectoryStore) -> None:
    sid = store.session_id
    path = store.write_kernel(7, "# v1\n")
    assert path == store.path / "kernels" / "iter_0007.py"
    assert store.write_kernel(7, "# v1\n") == path
    redo = store.write_kernel(7, "# v2\n")  # iteration 7 is not decided: a redo gets its own file
    assert (redo.name, redo.read_text(), path.read_text()) == ("iter_0007_redo1.py", "# v2\n", "# v1\n")
    store.append(IterationStarted(sid, 1.0, 7, None))
    store.append(KernelProposed(sid, 1.1, 7, "kernels/iter_0007_redo1.py", None, SHA))
    store.append(Decision(sid, 1.2, 7, "keep", "r", 2.0, 7))
    with pytest.raises(StoreError) as info:
        store.write_kernel(7, "# v3\n")
    assert str(info.value) == (f"refusing to overwrite {path}: iteration 7 is complete and its kernel differs")
    assert store.set_best(7) == store.path / "best.py"
    assert (store.path / "best.py").read_text() == "# v2\n"
    with pytest.raises(StoreError) as info:
        store.set_best(8)
    assert str(info.value) == f"iteration 8 proposed no kernel in {store.path}: it cannot be the best"


def test_results_tsv_is_a_view_of_the_events(store: DirectoryStore) -> None:
    sid = store.session_id
    result = {"status": "correct", "runtime_ms": 0.123456, "speedup": 1.55}
    events: list[Event] = [
        IterationStarted(sid, 1.0, 0, "one row\tper program"),
        KernelProposed(sid, 1.1, 0, "kernels/iter_0000.py", None, SHA),
        EvaluationFinished(sid, 1.2, 0, result),
        Decision(sid, 1.3, 0, "keep", "faster", 1.55, 0),
        IterationStarted(sid, 2.0, 1, None),
        KernelProposed(sid, 2.1, 1, "kernels/iter_0001.py", "vectorise\nloads", SHA),
        EvaluationFinished(sid, 2.2, 1, {"status": "compile_error", "runtime_ms": None}),
        Decision(sid, 2.3, 1, "error", "did not compile", None, 0),
        IterationStarted(sid, 3.0, 2, "interrupted: not a row"),
    ]
    for event in events:
        store.append(event)
    assert store.results_tsv() == store.path / "results.tsv"
    assert (store.path / "results.tsv").read_text() == (
        "iteration\tstatus\tspeedup\truntime_ms\tdecision\tintent\tkernel\n"
        "0\tcorrect\t1.550\t0.1235\tkeep\tone row per program\tkernels/iter_0000.py\n"
        "1\tcompile_error\t\t\terror\tvectorise loads\tkernels/iter_0001.py\n"
    )


def test_list_sessions_survives_a_broken_directory(store: DirectoryStore, tmp_path: Path) -> None:
    sid = store.session_id
    for event in [*_iteration(sid, 0, "keep", 1.2, 0), *_iteration(sid, 1, "keep", 1.8, 1)]:
        store.append(event)
    home = store.path.parent
    broken = home / "20260101-000000-broken-0000"
    broken.mkdir()
    (broken / "events.jsonl").write_text("")
    (broken / "config.json").write_text("{not json")
    assert list_sessions(home) == [
        SessionSummary(
            session_id=broken.name,
            path=broken,
            problem_name=None,
            backend=None,
            model=None,
            started_at_unix_s=None,
            iterations_completed=0,
            best_speedup=None,
            finished=False,
            error=f"{broken / 'config.json'} cannot be read: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        SessionSummary(
            session_id=sid,
            path=store.path,
            problem_name="L1#23",
            backend="triton",
            model="offline",
            started_at_unix_s=store.created_at_unix_s,
            iterations_completed=2,
            best_speedup=1.8,
            finished=False,
            error=None,
        ),
    ]
    assert list_sessions(tmp_path / "no-such-home") == []


def test_default_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_home() == tmp_path / "kernel-code" / "sessions"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_home() == tmp_path / "h" / ".local" / "share" / "kernel-code" / "sessions"


def test_memory_store_keeps_events_and_checks_json() -> None:
    memory = MemoryStore()
    events: list[Event] = [IterationStarted("s", 1.0, 0, None), Decision("s", 2.0, 0, "keep", "r", 1.5, 0)]
    for event in events:
        memory.append(event)
    assert memory.events == events
    with pytest.raises(InternalError) as info:
        memory.append(Decision("s", 3.0, 1, "keep", "r", float("nan"), 1))
    assert str(info.value).startswith("a 'decision' event cannot be written as JSON: Out of range float values")
    assert memory.events == events


CHILD = textwrap.dedent(
    """
    import hashlib, sys, time
    from pathlib import Path
    from openkernel.events import Decision, IterationStarted, KernelProposed
    from openkernel.store import DirectoryStore

    store = DirectoryStore.open(Path(sys.argv[1]))
    sid = store.session_id
    for i in range(100):
        store.append(IterationStarted(sid, time.time(), i, f"idea {i}"))
        source = f"# kernel of iteration {i}\\n"
        path = store.write_kernel(i, source)
        digest = hashlib.sha256(source.encode()).hexdigest()
        store.append(KernelProposed(sid, time.time(), i, str(path.relative_to(store.path)), f"idea {i}", digest))
        time.sleep(0.5)  # evaluating: the parent kills us in here
        store.append(Decision(sid, time.time(), i, "keep", "faster", 1.0 + i, i))
        time.sleep(0.01)
    """
)


def test_resume_after_sigkill_mid_iteration(store: DirectoryStore) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(store.path)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120.0
        while not any(isinstance(e, KernelProposed) and e.iteration == 3 for e in store.read_events().events):
            assert child.poll() is None, child.stderr.read() if child.stderr else b""
            assert time.monotonic() < deadline, "the child wrote no kernel for iteration 3 within 120 s"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    reopened = DirectoryStore.open(store.path)
    read = reopened.read_events()
    assert [(e.kind, getattr(e, "iteration", None)) for e in read.events] == [
        *((kind, i) for i in range(3) for kind in ("iteration_started", "kernel_proposed", "decision")),
        ("iteration_started", 3),
        ("kernel_proposed", 3),
    ]
    assert read.torn_line is None
    point = reopened.resume_point()
    assert point == ResumePoint(next_iteration=3, completed=(0, 1, 2), interrupted=3, best_iteration=2, finished=False)
    for i in point.completed:
        assert (store.path / "kernels" / f"iter_{i:04d}.py").read_text() == f"# kernel of iteration {i}\n"

    # The resume redoes iteration 3 with a new kernel; nothing of iterations 0-2 is lost.
    sid = reopened.session_id
    reopened.append(Resumed(sid, time.time(), 3, "resumed after the process was killed: iteration 3 is redone", None))
    reopened.append(IterationStarted(sid, time.time(), 3, "idea 3, again"))
    redo = reopened.write_kernel(3, "# kernel of iteration 3, redone\n")
    reopened.append(KernelProposed(sid, time.time(), 3, str(redo.relative_to(store.path)), None, SHA))
    reopened.append(Decision(sid, time.time(), 3, "keep", "faster", 4.0, 3))
    assert redo.name == "iter_0003_redo1.py"
    assert reopened.resume_point() == ResumePoint(4, (0, 1, 2, 3), None, 3, False)
    assert reopened.set_best(3).read_text() == "# kernel of iteration 3, redone\n"
