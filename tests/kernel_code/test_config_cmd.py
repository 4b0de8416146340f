"""``kernel-code config show|path``, and ``optimize`` taking its defaults (and its key) from the settings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_code.cli import main
from openkernel.events import Decision, SessionStarted, UsageUpdate
from openkernel.store import DirectoryStore, list_sessions
from tests.llm_fakes import FakeServer, openai_events, sse

FILE_KEY = "sk-canary-config-file-5150"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("KERNEL_CODE_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                         "ANTHROPIC_BASE_URL"):  # fmt: skip
            monkeypatch.delenv(name)
    for var, folder in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")):
        monkeypatch.setenv(var, str(tmp_path / folder))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path


def _user_file(home: Path, text: str) -> Path:
    path = home / "config" / "kernel-code" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_show_lists_every_setting_with_its_source(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    user = _user_file(home, f'[openai]\napi_key = "{FILE_KEY}"\nmodel = "gpt-4.1"\n[loop]\nbackend = "cuda"\n')
    project = home / "work" / "kernel-code.toml"
    project.write_text("[loop]\niterations = 4\n[traces]\nenabled = true\n")
    monkeypatch.setenv("KERNEL_CODE_EVALUATE_TIMEOUT_S", "60")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-env-99")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    data = home / "data" / "kernel-code"
    assert out.splitlines() == [
        "loop.model               (not set)  (default)",
        f'loop.backend             "cuda"  (user file {user})',
        f"loop.iterations          4  (project file {project})",
        "loop.wall_time_budget_s  (not set)  (default)",
        "loop.token_budget        (not set)  (default)",
        "loop.cost_budget_usd     (not set)  (default)",
        "evaluate.timeout_s       60.0  (env KERNEL_CODE_EVALUATE_TIMEOUT_S)",
        'evaluate.size            "auto"  (default)',
        f'sessions.home            "{data / "sessions"}"  (default)',
        f"openai.api_key           set (from user file {user})",
        "openai.base_url          (not set)  (default)",
        f'openai.model             "gpt-4.1"  (user file {user})',
        "anthropic.api_key        set (from ANTHROPIC_API_KEY)",
        "anthropic.base_url       (not set)  (default)",
        "anthropic.model          (not set)  (default)",
        "prices.file              (not set)  (default)",
        f"traces.enabled           true  (project file {project})",
        f'traces.dir               "{data / "traces"}"  (default)',
        'dashboard.host           "127.0.0.1"  (default)',
        "dashboard.port           8050  (default)",
    ]
    assert FILE_KEY not in out and "sk-ant-canary-env-99" not in out

    assert main(["config", "show", "--json"]) == 0
    text = capsys.readouterr().out
    assert FILE_KEY not in text and "sk-ant-canary-env-99" not in text
    payload = json.loads(text)
    assert payload["files"] == [str(user), str(project)]
    assert payload["settings"]["openai.api_key"] == {
        "value": f"set (from user file {user})", "source": {"kind": "user file", "name": str(user)}}  # fmt: skip
    assert payload["settings"]["anthropic.api_key"] == {
        "value": "set (from ANTHROPIC_API_KEY)", "source": {"kind": "env", "name": "ANTHROPIC_API_KEY"}}  # fmt: skip
    assert payload["settings"]["loop.iterations"] == {
        "value": 4,
        "source": {"kind": "project file", "name": str(project)},
    }
    assert payload["settings"]["loop.model"] == {"value": None, "source": {"kind": "default", "name": None}}
    assert len(payload["settings"]) == 20


def test_path_says_where_the_files_are(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path"]) == 0
    user = home / "config" / "kernel-code" / "config.toml"
    assert capsys.readouterr().out.splitlines() == [
        f"user file     {user} (not there)",
        "project file  none: no kernel-code.toml here or in a parent folder "
        f"(create {home / 'work' / 'kernel-code.toml'})",
    ]
    _user_file(home, "")
    (home / "kernel-code.toml").write_text("")  # a parent of the working directory
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"user file     {user} (exists)",
        f"project file  {home / 'kernel-code.toml'} (exists)",
    ]


def test_a_bad_file_is_one_line_and_exit_code_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user = _user_file(home, '[openai]\napi_keys = "sk-typo-canary"\n')
    assert main(["config", "show"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"kernel-code: error: {user}: [openai] api_keys is not a setting: did you mean api_key? "
        "the keys of [openai] are api_key, base_url, model\n"
    )
    assert "sk-typo-canary" not in captured.err


def test_optimize_takes_model_iterations_home_url_and_key_from_the_settings(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model replies without a kernel: the iteration is a recorded error, and nothing is evaluated.
    server = FakeServer([sse(openai_events(["Intent: nothing yet\nNo code today."]))])
    server.start()
    try:
        _user_file(home, f'[openai]\napi_key = "{FILE_KEY}"\nbase_url = "{server.root}/v1"\nmodel = "gpt-4o"\n'
                         '[loop]\nmodel = "openai"\ncost_budget_usd = 3.5\n'
                         '[prices]\nfile = "prices.toml"\n')  # fmt: skip
        # The user's price for the model (relative to the config file) overrides the built-in one.
        (home / "config" / "kernel-code" / "prices.toml").write_text(
            '["gpt-4o"]\ninput_usd_per_mtok = 2.0\noutput_usd_per_mtok = 10.0\n'
        )
        (home / "work" / "kernel-code.toml").write_text('[loop]\niterations = 1\n[evaluate]\nsize = "small"\n'
                                                        '[sessions]\nhome = "my-sessions"\n')  # fmt: skip
        assert main(["optimize", "softmax_fp32", "--headless"]) == 0
    finally:
        server.stop()
    out = capsys.readouterr().out
    # The key from the file reached the provider, and only the provider.
    assert [(path, headers["authorization"]) for path, headers, _ in server.requests] == [
        ("/v1/chat/completions", f"Bearer {FILE_KEY}")
    ]
    assert server.requests[0][2]["model"] == "gpt-4o"
    assert FILE_KEY not in out
    [session] = list_sessions(home / "work" / "my-sessions")
    store = DirectoryStore.open(session.path)
    assert (store.config.model, store.config.max_iterations, store.config.size, store.config.backend,
            store.config.cost_budget_usd) == ("openai:gpt-4o", 1, "small", "triton", 3.5)  # fmt: skip
    events = store.read_events().events
    assert [type(e).__name__ for e in events if isinstance(e, SessionStarted | Decision)] == [
        "SessionStarted",
        "Decision",
    ]
    assert [e.decision for e in events if isinstance(e, Decision)] == ["error"]
    # 1000 prompt tokens at $2/M and 500 completion tokens at $10/M
    assert [round(e.cost_usd or 0, 9) for e in events if isinstance(e, UsageUpdate)] == [0.007]
    for path in session.path.rglob("*"):
        if path.is_file():
            assert FILE_KEY not in path.read_text(errors="replace"), path


def test_a_flag_wins_over_the_settings(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _user_file(home, "[loop]\niterations = 5\n")
    assert main(["optimize", "softmax_fp32", "--iterations", "0", "--headless"]) == 2
    assert capsys.readouterr().err == "kernel-code: error: --iterations must be a whole number >= 1, not 0\n"
