"""``kernel-code sessions`` lists what the store holds, broken sessions included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from openkernel.events import Decision, IterationStarted, SessionConfig
from openkernel.store import DirectoryStore
from tests.conftest import ROOT

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]


def test_sessions_json_lists_good_and_broken(tmp_path: Path) -> None:
    config = SessionConfig(backend="triton", model="offline", size="small", max_iterations=3,
                           wall_time_budget_s=None, token_budget=None, cost_budget_usd=None)  # fmt: skip
    store = DirectoryStore.create(tmp_path, "softmax_fp32", config)
    sid = store.session_id
    store.append(IterationStarted(session_id=sid, at_unix_s=1.0, iteration=0, intent="baseline"))
    store.append(Decision(session_id=sid, at_unix_s=2.0, iteration=0, decision="keep", reason="first correct kernel",
                          speedup=1.5, best_iteration=0))  # fmt: skip
    broken = tmp_path / "20260101-000000-broken-0000"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    proc = subprocess.run([*EXE, "sessions", "--home", str(tmp_path), "--json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert [(s["session_id"], s["problem"], s["iterations_completed"], s["best_speedup"]) for s in listed] == [
        (broken.name, None, 0, None),
        (sid, "softmax_fp32", 1, 1.5),
    ]
    assert listed[0]["error"] == f"{broken} is not a kernel-code session: it has no events.jsonl"
    assert listed[1]["error"] is None


def test_no_sessions_yet(tmp_path: Path) -> None:
    proc = subprocess.run([*EXE, "sessions", "--home", str(tmp_path / "none")], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)  # fmt: skip
    assert (proc.returncode, proc.stdout.strip()) == (0, f"no sessions under {tmp_path / 'none'}")
