"""``kernel-code traces export | stats | sft`` on sessions recorded by the real loop, the canary test, and
``kernel-code optimize --capture-traces`` end to end (a local OpenAI-protocol server, a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kernel_code.cli import main
from openkernel.traces.build import build_trace
from openkernel.traces.write import read_traces
from tests.conftest import ROOT
from tests.llm_fakes import FakeServer, openai_events, sse
from tests.trace_sessions import KERNEL_A, STEPS, Step, record

EXE = [sys.executable, "-c", "import sys; from kernel_code.cli import main; sys.exit(main())"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sessions home of a user with no config files: $XDG_DATA_HOME/kernel-code/sessions."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("KERNEL_CODE_")]:
        monkeypatch.delenv(name)
    return tmp_path / "data" / "kernel-code" / "sessions"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_export_every_session_into_the_default_traces_dir(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(home / "s1", STEPS)
    record(home / "s2", STEPS[:1], started_at_unix_s=1_795_100_000.0)
    (home / "broken").mkdir()
    traces = home.parent / "traces"
    code, out, err = _run(["traces", "export"], capsys)
    assert (code, err) == (0, f"kernel-code: skipped broken: {home / 'broken'} is not a kernel-code session: "
                              "it has no events.jsonl\n")  # fmt: skip
    assert out.splitlines() == [
        f"added s1 (4 iterations): {traces / 'gpu=H200' / 'date=2026-11-18' / 's1.parquet'}",
        f"added s2 (1 iterations): {traces / 'gpu=H200' / 'date=2026-11-19' / 's2.parquet'}",
        f"traces in {traces}: 2 added, 0 replaced, 0 unchanged",
    ]
    assert sorted(read_traces(traces).to_pylist(), key=lambda r: r["session_id"]) == [
        build_trace(home / "s1"), build_trace(home / "s2"),
    ]  # fmt: skip
    code, out, _ = _run(["traces", "export", "s1", "-o", str(traces)], capsys)
    assert (code, out.splitlines()[-1]) == (0, f"traces in {traces}: 0 added, 0 replaced, 1 unchanged")


def test_export_named_sessions_into_one_file(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(home / "s1", STEPS)
    record(tmp_path / "elsewhere" / "s2", STEPS[:2])
    out_file = tmp_path / "out" / "all.parquet"
    code, out, _ = _run(["traces", "export", "s1", str(tmp_path / "elsewhere" / "s2"), "-o", str(out_file)], capsys)
    assert (code, out) == (0, f"wrote 2 sessions (6 iterations) to {out_file}\n")
    assert read_traces(out_file).to_pylist() == [build_trace(home / "s1"), build_trace(tmp_path / "elsewhere" / "s2")]


def test_clear_one_line_errors(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["traces", "export"], capsys) == (2, "", (
        f"kernel-code: error: no sessions found under {home}: record one with `kernel-code optimize`, "
        "or name session directories\n"
    ))  # fmt: skip
    assert _run(["traces", "export", "nope"], capsys) == (2, "", (
        f"kernel-code: error: no session 'nope': it is neither a directory nor a session id under {home} "
        "(list them with `kernel-code sessions`)\n"
    ))  # fmt: skip
    (tmp_path / "empty").mkdir()
    assert _run(["traces", "stats", str(tmp_path / "empty")], capsys) == (2, "", (
        f"kernel-code: error: {tmp_path / 'empty'} has no traces (no .parquet files): "
        "write some with `kernel-code traces export`\n"
    ))  # fmt: skip
    assert _run(["traces", "sft", str(tmp_path / "empty"), "--top", "1.5", "-o", "p.jsonl"], capsys) == (2, "", (
        "kernel-code: error: --top must be a fraction in (0, 1], e.g. 0.1 for the best 10%, got 1.5\n"
    ))  # fmt: skip


def test_stats_and_sft_from_the_command_line(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(home / "s1", STEPS)  # kept 2x and 4x, a wrong kernel, a reply without code
    traces = tmp_path / "traces"
    assert _run(["traces", "export", "-o", str(traces)], capsys)[0] == 0
    code, out, _ = _run(["traces", "stats", str(traces), "--json"], capsys)
    spread = {"count": 2, "min": 2.0, "p25": 2.5, "median": 3.0, "p75": 3.5, "max": 4.0}
    best = {"count": 1, "min": 4.0, "p25": 4.0, "median": 4.0, "p75": 4.0, "max": 4.0}
    assert (code, json.loads(out)) == (0, {
        "sessions": 1, "iterations": 4, "kept": 2, "keep_rate": 0.5,
        "groups": [{"hardware": "NVIDIA H200", "backend": "triton", "model": "openai:gpt-test", "sessions": 1,
                    "iterations": 4, "kept": 2, "keep_rate": 0.5, "correct": 2, "speedup": spread,
                    "best_speedup": best}],
    })  # fmt: skip
    code, out, _ = _run(["traces", "stats", str(traces)], capsys)
    assert (code, out.splitlines()) == (0, [
        "1 sessions · 4 iterations · 2 kept (50.0%)",
        "",
        "NVIDIA H200 · triton · openai:gpt-test",
        "  1 sessions · 4 iterations · 2 kept (50.0%) · 2 correct",
        "  speedup of correct iterations: min 2.00x · p25 2.50x · median 3.00x · p75 3.50x · max 4.00x (n=2)",
        "  best speedup per session:      min 4.00x · p25 4.00x · median 4.00x · p75 4.00x · max 4.00x (n=1)",
    ])  # fmt: skip
    pairs = tmp_path / "pairs.jsonl"
    code, out, _ = _run(["traces", "sft", str(traces), "--top", "0.5", "-o", str(pairs)], capsys)
    assert (code, out) == (0, f"wrote 1 pair (the best 50% by speedup) to {pairs}\n")
    assert [(p["session_id"], p["iteration"], p["speedup"]) for p in map(json.loads, pairs.read_text().splitlines())] \
        == [("s1", 1, 4.0)]  # fmt: skip


OPENAI = "sk-proj-CANARYopenai00000000000001"
ANTHROPIC = "sk-ant-api03-CANARYanthropic0000000001"
BEARER = "CANARYbearer0000000000001"
ENV_VALUE = "CANARYenvvalue00000001"
PLANTED = f"key {OPENAI}\nother {ANTHROPIC}\nAuthorization: Bearer {BEARER}\nOPENAI_API_KEY={ENV_VALUE}\n"
SECRETS = (OPENAI, ANTHROPIC, BEARER, ENV_VALUE, "CANARY")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_canaries_never_reach_a_written_file(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = KERNEL_A + f"# {PLANTED.replace(chr(10), chr(10) + '# ')}\n"
    step = Step(kernel, "plant", 1.0, prompt=f"prompt\n{PLANTED}", reply=f"reply\n{PLANTED}")
    record(home / "s1", [step, Step(None, "x")], hints=(f"hint {OPENAI}",))
    session = home / "s1"
    # a prompt file from before prompts were scrubbed when kept
    (session / "prompts" / "iter_0001.md").write_text(f"old prompt\n{PLANTED}")
    planted = [(p.relative_to(session).as_posix(), s) for p in sorted(session.rglob("*")) if p.is_file()
               for s in SECRETS if s in p.read_text()]  # fmt: skip
    assert {name for name, _ in planted} == {"events.jsonl", "kernels/iter_0000.py", "best.py", "prompts/iter_0001.md"}
    dataset, single = tmp_path / "traces", tmp_path / "one.parquet"
    assert _run(["traces", "export", "s1", "-o", str(dataset)], capsys)[0] == 0
    assert _run(["traces", "export", "s1", "-o", str(single)], capsys)[0] == 0
    written = [p for p in dataset.rglob("*") if p.is_file()] + [single]
    assert len(written) == 2
    for path in written:
        raw = path.read_bytes()
        assert [s for s in SECRETS if s.encode() in raw] == [], path
        strings = list(_strings(pq.read_table(path).to_pylist()))  # every string column, decompressed
        assert [s for s in SECRETS for text in strings if s in text] == [], path
        row = pq.read_table(path).to_pylist()[0]
        first, second = row["iterations"]
        redacted = (
            "key [REDACTED:openai_key]\nother [REDACTED:anthropic_key]\nAuthorization: [REDACTED:authorization]\n"
            "OPENAI_API_KEY=[REDACTED:assignment]\n"
        )
        assert (first["prompt"], first["response"], first["hints"]) == (
            f"prompt\n{redacted}", f"reply\n{redacted}", ["hint [REDACTED:openai_key]"],
        )  # fmt: skip
        assert first["kernel_code"] == row["final_kernel"] == KERNEL_A + "# " + redacted.replace("\n", "\n# ") + "\n"
        assert second["prompt"] == f"old prompt\n{redacted}"


def _optimize(tmp_path: Path, server: FakeServer, *flags: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EXE, "optimize", "softmax_fp32", "--model", "openai:gpt-4o", "--base-url", server.root + "/v1",
         "--iterations", "1", "--headless", *flags],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False,
    )  # fmt: skip


def test_optimize_captures_traces_when_asked(tmp_path: Path) -> None:
    key = "sk-canary-capture-0000000000000001"
    # a reply without code: the iteration ends without an evaluation, so the session takes a second
    server = FakeServer([sse(openai_events([f"Intent: nothing\nI echo {key} and no code"]))])
    server.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_CODE_")}
    env |= {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "OPENAI_API_KEY": key, "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    traces = tmp_path / "data" / "kernel-code" / "traces"
    try:
        plain = _optimize(tmp_path, server, env=env)
        assert (plain.returncode, traces.exists()) == (0, False), plain.stderr  # off by default
        flagged = _optimize(tmp_path, server, "--capture-traces", env=env)
        configured = _optimize(tmp_path, server, env=env | {"KERNEL_CODE_TRACES_ENABLED": "true"})
    finally:
        server.stop()
    assert (flagged.returncode, configured.returncode) == (0, 0), flagged.stderr + configured.stderr
    files = sorted(traces.rglob("*.parquet"))
    assert [line for line in flagged.stdout.splitlines() if line.startswith("traces ")] == [f"traces added: {files[0]}"]
    assert len(files) == 2
    rows = read_traces(traces).to_pylist()
    home = tmp_path / "data" / "kernel-code" / "sessions"
    captured = [proc.stdout.split()[1] for proc in (flagged, configured)]  # "session <id> in <path>"
    assert sorted(r["session_id"] for r in rows) == sorted(captured)
    assert len(list(home.iterdir())) == 3
    for row in rows:
        (it,) = row["iterations"]
        assert it["prompt"] == (home / row["session_id"] / "prompts" / "iter_0000.md").read_text()
        assert it["prompt"].startswith("<system>\n") and "class Model(nn.Module)" in it["prompt"]
        assert it["response"] == "Intent: nothing\nI echo [REDACTED:openai_key] and no code"
        assert it["decision"] == "error"
        assert key not in json.dumps(row)
