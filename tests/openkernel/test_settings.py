"""Settings: defaults < user file < project file < environment < flags, each value with its source."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from openkernel.errors import ConfigError
from openkernel.settings import (
    DashboardSettings,
    EvaluateSettings,
    LoopSettings,
    PricesSettings,
    ProviderSettings,
    SessionsSettings,
    Settings,
    Source,
    TracesSettings,
    default_model,
    key_environment,
    load_settings,
    project_config_path,
    setting_names,
    shown_value,
    user_config_path,
    with_flags,
)

FILE_KEY = "sk-canary-settings-file-0042"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean user: HOME, XDG dirs and the working directory under tmp_path; no provider or KERNEL_CODE_ vars."""
    for name in list(os.environ):
        if name.startswith("KERNEL_CODE_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                         "ANTHROPIC_BASE_URL"):  # fmt: skip
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    work = tmp_path / "project" / "src" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return tmp_path


def _user_file(home: Path, text: str) -> Path:
    path = home / "config" / "kernel-code" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _project_file(home: Path, text: str) -> Path:
    path = home / "project" / "kernel-code.toml"
    path.write_text(text)
    return path


def _defaults(home: Path) -> dict[str, Any]:
    data = home / "data" / "kernel-code"
    return {
        "loop": LoopSettings(None, "triton", 10, None, None, None),
        "evaluate": EvaluateSettings(300.0, "auto"),
        "sessions": SessionsSettings(data / "sessions"),
        "openai": ProviderSettings(None, None, None),
        "anthropic": ProviderSettings(None, None, None),
        "prices": PricesSettings(None),
        "traces": TracesSettings(False, data / "traces"),
        "dashboard": DashboardSettings("127.0.0.1", 8050),
    }


def test_defaults_alone(home: Path) -> None:
    settings = load_settings()
    assert settings == Settings(**_defaults(home), sources=dict.fromkeys(setting_names(), Source("default")),
                                files=())  # fmt: skip
    assert default_model(settings) == "offline"
    assert user_config_path() == home / "config" / "kernel-code" / "config.toml"
    assert project_config_path() is None


def test_each_layer_overrides_the_one_below_and_says_so(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = _user_file(
        home,
        f"""
[loop]
iterations = 7
backend = "cuda"
cost_budget_usd = 2
[evaluate]
timeout_s = 120
[openai]
api_key = "{FILE_KEY}"
model = "gpt-4.1"
[sessions]
home = "sessions-here"
[prices]
file = "~/prices.toml"
""",
    )
    project = _project_file(
        home,
        """
[loop]
iterations = 3
model = "openai"
[evaluate]
size = "small"
[traces]
enabled = true
dir = "traces"
[dashboard]
port = 9000
""",
    )
    monkeypatch.setenv("KERNEL_CODE_LOOP_ITERATIONS", "5")
    monkeypatch.setenv("KERNEL_CODE_LOOP_TOKEN_BUDGET", "100000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("KERNEL_CODE_DASHBOARD_HOST", "0.0.0.0")
    settings = with_flags(
        load_settings(), {"evaluate.timeout_s": ("--timeout", 30.0), "loop.backend": ("--backend", "triton")}
    )

    in_user, in_project = Source("user file", str(user)), Source("project file", str(project))
    expected = _defaults(home) | {
        "loop": LoopSettings("openai", "triton", 5, None, 100000, 2.0),
        "evaluate": EvaluateSettings(30.0, "small"),
        "sessions": SessionsSettings(user.parent / "sessions-here"),  # relative: from the file's folder
        "openai": ProviderSettings(FILE_KEY, "http://127.0.0.1:9/v1", "gpt-4.1"),
        "anthropic": ProviderSettings("sk-ant-env-key", None, None),
        "prices": PricesSettings(home / "home" / "prices.toml"),
        "traces": TracesSettings(True, project.parent / "traces"),
        "dashboard": DashboardSettings("0.0.0.0", 9000),
    }
    sources = dict.fromkeys(setting_names(), Source("default")) | {
        "loop.model": in_project,
        "loop.backend": Source("flag", "--backend"),
        "loop.iterations": Source("env", "KERNEL_CODE_LOOP_ITERATIONS"),
        "loop.token_budget": Source("env", "KERNEL_CODE_LOOP_TOKEN_BUDGET"),
        "loop.cost_budget_usd": in_user,
        "evaluate.timeout_s": Source("flag", "--timeout"),
        "evaluate.size": in_project,
        "sessions.home": in_user,
        "openai.api_key": in_user,
        "openai.base_url": Source("env", "OPENAI_BASE_URL"),
        "openai.model": in_user,
        "anthropic.api_key": Source("env", "ANTHROPIC_API_KEY"),
        "prices.file": in_user,
        "traces.enabled": in_project,
        "traces.dir": in_project,
        "dashboard.host": Source("env", "KERNEL_CODE_DASHBOARD_HOST"),
        "dashboard.port": in_project,
    }
    assert settings == Settings(**expected, sources=sources, files=(user, project))
    # A bare provider takes the provider's default model; the keys are shown only as set, with their source.
    assert default_model(settings) == "openai:gpt-4.1"
    assert shown_value(settings, "openai.api_key") == f"set (from user file {user})"
    assert shown_value(settings, "anthropic.api_key") == "set (from ANTHROPIC_API_KEY)"
    assert str(settings.sources["loop.iterations"]) == "env KERNEL_CODE_LOOP_ITERATIONS"
    assert FILE_KEY not in repr(settings)


def test_the_kernel_code_variable_wins_over_the_providers_own(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-standard")
    monkeypatch.setenv("KERNEL_CODE_OPENAI_API_KEY", "sk-ours")
    monkeypatch.setenv("KERNEL_CODE_LOOP_MODEL", "")  # empty: unset, as shells use it
    settings = load_settings()
    assert (settings.openai.api_key, settings.sources["openai.api_key"]) == (
        "sk-ours", Source("env", "KERNEL_CODE_OPENAI_API_KEY"))  # fmt: skip
    assert (settings.loop.model, settings.sources["loop.model"]) == (None, Source("default"))


def test_a_key_configured_still_defaults_to_offline(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-some-key")
    assert default_model(load_settings()) == "offline"
    monkeypatch.setenv("KERNEL_CODE_LOOP_MODEL", "anthropic:claude-sonnet-4-5")
    assert default_model(load_settings()) == "anthropic:claude-sonnet-4-5"
    monkeypatch.setenv("KERNEL_CODE_LOOP_MODEL", "anthropic")  # bare, and no default model for it: left as it is
    assert default_model(load_settings()) == "anthropic"


def test_key_environment_carries_the_file_key_without_touching_os_environ(home: Path) -> None:
    _user_file(home, f'[openai]\napi_key = "{FILE_KEY}"\n')
    env = key_environment(load_settings(), {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-ant"})
    assert env == {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": FILE_KEY}
    assert "OPENAI_API_KEY" not in os.environ


def test_the_nearest_project_file_wins(home: Path) -> None:
    _project_file(home, "[loop]\niterations = 4\n")
    nearer = home / "project" / "src" / "kernel-code.toml"
    nearer.write_text("[loop]\niterations = 6\n")
    settings = load_settings()
    assert (settings.loop.iterations, settings.sources["loop.iterations"]) == (6, Source("project file", str(nearer)))
    assert settings.files == (nearer,)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[loop]\niteration = 3\n", "[loop] iteration is not a setting: did you mean iterations? the keys of [loop] "
         "are model, backend, iterations, wall_time_budget_s, token_budget, cost_budget_usd"),
        ("[loop]\niterations = \"five\"\n", "[loop] iterations must be a whole number >= 1, not 'five': "
         "write it like iterations = 10"),
        ("[loop]\niterations = 0\n", "[loop] iterations must be a whole number >= 1, not 0: "
         "write it like iterations = 10"),
        ("[loop]\nbackend = \"rocm\"\n", "[loop] backend must be one of \"triton\", \"cuda\", not 'rocm': "
         "write it like backend = \"triton\""),
        ("[evaluate]\ntimeout_s = -1\n", "[evaluate] timeout_s must be a number > 0, not -1: "
         "write it like timeout_s = 300"),
        ("[traces]\nenabled = \"yes\"\n", "[traces] enabled must be true or false, not 'yes': "
         "write it like enabled = true"),
        ("[dashboard]\nport = 70000\n", "[dashboard] port must be a whole number from 1 to 65535, not 70000: "
         "write it like port = 8050"),
        ("iterations = 3\n", "iterations is not inside a section: put it under [loop]"),
        ("[lop]\n", "unknown section [lop]: did you mean loop? the sections are [anthropic], [dashboard], "
         "[evaluate], [loop], [openai], [prices], [sessions], [traces]"),
        ("[loop\n", "not valid TOML (Expected ']' at the end of a table declaration (at line 1, column 6)): "
         "fix that line"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_file_key_and_fix(home: Path, text: str, error: str) -> None:
    path = _project_file(home, text)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"{path}: {error}"


def test_a_wrongly_typed_key_is_never_quoted(home: Path) -> None:
    path = _user_file(home, "[anthropic]\napi_key = 12345678987654321\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f'{path}: [anthropic] api_key must be a string: write it like api_key = "..."'


@pytest.mark.parametrize(
    ("variable", "value", "error"),
    [
        ("KERNEL_CODE_LOOP_ITERATIONS", "many", "KERNEL_CODE_LOOP_ITERATIONS must be a whole number >= 1, "
         "not 'many': set it like KERNEL_CODE_LOOP_ITERATIONS=10"),
        ("KERNEL_CODE_TRACES_ENABLED", "maybe", "KERNEL_CODE_TRACES_ENABLED must be true or false, not 'maybe': "
         "set it like KERNEL_CODE_TRACES_ENABLED=true"),
        ("KERNEL_CODE_LOOP_ITERATION", "3", "KERNEL_CODE_LOOP_ITERATION is not a setting: did you mean "
         "KERNEL_CODE_LOOP_ITERATIONS? unset it (kernel-code config show lists every setting)"),
    ],
)  # fmt: skip
def test_a_bad_variable_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                    error: str) -> None:  # fmt: skip
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == error


def test_booleans_from_the_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    for text in ("1", "TRUE", "yes", "on", "0", "false", "No", "off"):
        monkeypatch.setenv("KERNEL_CODE_TRACES_ENABLED", text)
        seen.append(load_settings().traces.enabled)
    assert seen == [True, True, True, True, False, False, False, False]


def test_a_bad_flag_is_one_line(home: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        with_flags(load_settings(), {"loop.iterations": ("--iterations", 0)})
    assert str(caught.value) == "--iterations must be a whole number >= 1, not 0"
