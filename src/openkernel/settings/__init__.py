"""The user's settings, layered, and where each value came from.

Lowest layer first, each overriding the one before:

1. built-in defaults (the table ``KEYS`` in ``openkernel.settings.keys``);
2. the user file, ``$XDG_CONFIG_HOME/kernel-code/config.toml`` (default ``~/.config/kernel-code/config.toml``);
3. the project file, ``kernel-code.toml`` in the current directory or the nearest parent that has one;
4. the environment: ``KERNEL_CODE_<SECTION>_<KEY>`` for every setting (``KERNEL_CODE_LOOP_ITERATIONS=5``),
   and the providers' own ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL`` and
   ``ANTHROPIC_BASE_URL`` (a ``KERNEL_CODE_`` variable wins over these when both are set);
5. command-line flags, which the command line applies with :func:`with_flags`.

Every value remembers its :class:`Source`, so ``kernel-code config show`` can say why it is what it is.
A file or variable this version does not understand is a :class:`ConfigError` of one line naming the
file (or variable), the key and the fix: a typo silently ignored would be a setting silently lost.

API keys are secrets: read from a file or the environment, used, and never written or shown. Their
dataclass field is left out of ``repr``, error messages never quote a key's value, and
:func:`shown_value` prints "set (from ...)" or "not set" in their place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from openkernel.errors import ConfigError
from openkernel.settings.keys import (
    BY_NAME,
    DEFAULT,
    ENV_PREFIX,
    STANDARD_ENV,
    BadValue,
    Source,
    convert,
    defaults,
    env_name,
    not_value,
    read_environment,
    read_file,
    setting_names,
)

__all__ = [
    "ENV_PREFIX",
    "PROJECT_FILE",
    "STANDARD_ENV",
    "DashboardSettings",
    "EvaluateSettings",
    "LoopSettings",
    "PricesSettings",
    "ProviderSettings",
    "SessionsSettings",
    "Settings",
    "Source",
    "TracesSettings",
    "default_model",
    "default_settings",
    "env_name",
    "key_environment",
    "load_settings",
    "project_config_path",
    "setting_names",
    "shown_value",
    "user_config_path",
    "with_flags",
]

PROJECT_FILE = "kernel-code.toml"


# ------------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class LoopSettings:
    model: str | None  # None: none named, and default_model() says "offline"
    backend: str  # "triton" or "cuda"
    iterations: int  # the iteration budget
    wall_time_budget_s: float | None  # None: no time budget
    token_budget: int | None  # prompt + completion tokens; None: no budget
    cost_budget_usd: float | None  # None: no money budget


@dataclass(frozen=True)
class EvaluateSettings:
    timeout_s: float  # one candidate's whole evaluation, build included
    size: str  # "auto", "full" or "small"


@dataclass(frozen=True)
class SessionsSettings:
    home: Path  # where sessions are recorded


@dataclass(frozen=True)
class ProviderSettings:
    api_key: str | None = field(repr=False)  # a secret: never shown, never written
    base_url: str | None  # None: the provider's own API
    model: str | None  # what "--model openai" (no name after the colon) means


@dataclass(frozen=True)
class PricesSettings:
    file: Path | None  # an extra price table (see openkernel.generate.pricing.load_prices)


@dataclass(frozen=True)
class TracesSettings:
    enabled: bool  # capture traces (kernel_code.traces); off unless asked for
    dir: Path


@dataclass(frozen=True)
class DashboardSettings:
    host: str
    port: int


@dataclass(frozen=True)
class Settings:
    loop: LoopSettings
    evaluate: EvaluateSettings
    sessions: SessionsSettings
    openai: ProviderSettings
    anthropic: ProviderSettings
    prices: PricesSettings
    traces: TracesSettings
    dashboard: DashboardSettings
    sources: Mapping[str, Source] = field(repr=False)  # "loop.iterations" -> its Source, for every setting
    files: tuple[Path, ...]  # the config files read, lowest layer first

    def value(self, name: str) -> object:
        """The value of the setting ``name`` ("loop.iterations")."""
        section, key = name.split(".")
        return getattr(getattr(self, section), key)


_SECTIONS: Mapping[str, type] = {
    "loop": LoopSettings,
    "evaluate": EvaluateSettings,
    "sessions": SessionsSettings,
    "openai": ProviderSettings,
    "anthropic": ProviderSettings,
    "prices": PricesSettings,
    "traces": TracesSettings,
    "dashboard": DashboardSettings,
}


# ------------------------------------------------------------------------------------------- layers


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/kernel-code/config.toml``, or ``~/.config/kernel-code/config.toml``."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "kernel-code" / "config.toml"


def project_config_path(cwd: Path | None = None) -> Path | None:
    """The nearest ``kernel-code.toml`` at or above ``cwd``; None when there is none."""
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def _build(values: Mapping[str, object], sources: Mapping[str, Source], files: tuple[Path, ...]) -> Settings:
    sections: dict[str, Any] = {}
    for section, cls in _SECTIONS.items():
        sections[section] = cls(**{f.name: values[f"{section}.{f.name}"] for f in fields(cls)})
    return Settings(**sections, sources=dict(sources), files=files)


def default_settings() -> Settings:
    """The built-in defaults alone (what is left to go on when a config file cannot be read)."""
    values = defaults()
    return _build(values, dict.fromkeys(values, DEFAULT), ())


def load_settings(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Defaults, then the user file, the project file and the environment (flags: :func:`with_flags`)."""
    env = os.environ if environ is None else environ
    here = cwd or Path.cwd()
    values = defaults()
    sources: dict[str, Source] = dict.fromkeys(values, DEFAULT)
    files: list[Path] = []
    layers: list[dict[str, tuple[object, Source]]] = []
    user = user_config_path(env)
    if user.is_file():
        files.append(user)
        layers.append(read_file(user, Source("user file", str(user))))
    project = project_config_path(here)
    if project is not None:
        files.append(project)
        layers.append(read_file(project, Source("project file", str(project))))
    layers.append(read_environment(env, here))
    for layer in layers:
        for name, (value, source) in layer.items():
            values[name], sources[name] = value, source
    return _build(values, sources, tuple(files))


def with_flags(settings: Settings, flags: Mapping[str, tuple[str, object]]) -> Settings:
    """``settings`` with command-line values on top: ``{"loop.iterations": ("--iterations", 5)}``.

    The values are checked as a file's would be; relative paths are taken from the current directory.
    """
    values = {name: settings.value(name) for name in BY_NAME}
    sources = dict(settings.sources)
    for name, (flag, value) in flags.items():
        key = BY_NAME[name]
        try:
            values[name] = convert(key, value, Path.cwd())
        except BadValue:
            raise ConfigError(f"{flag} must be {key.expected()}{not_value(key, value)}") from None
        sources[name] = Source("flag", flag)
    return _build(values, sources, settings.files)


# -------------------------------------------------------------------------------------------- using


def shown_value(settings: Settings, name: str) -> str | int | float | bool | None:
    """The value to show for ``name``: as JSON writes it, and for an API key only whether it is set."""
    value = settings.value(name)
    if BY_NAME[name].secret:
        source = settings.sources[name]
        return "not set" if value is None else f"set (from {source.name if source.kind == 'env' else source})"
    return str(value) if isinstance(value, Path) else value  # type: ignore[return-value]


def default_model(settings: Settings) -> str:
    """The model to use: the one the settings or flags name, else "offline".

    A configured key does not pick an LLM on its own: spending money is something to ask for. A bare
    provider ("openai") takes the provider's default model from the settings when there is one.
    """
    model = settings.loop.model
    if model is None:
        return "offline"
    if model in ("openai", "anthropic"):
        provider: ProviderSettings = getattr(settings, model)
        if provider.model is not None:
            return f"{model}:{provider.model}"
    return model


def key_environment(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` with each configured API key under its provider's standard variable.

    For the LLM builder, which reads keys from a mapping (never from ``os.environ`` directly), so that
    a key from a config file reaches the SDK without ever being put into this process's environment.
    """
    env = dict(os.environ if environ is None else environ)
    for provider, variable in (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")):
        key: str | None = getattr(settings, provider).api_key
        if key is not None:
            env[variable] = key
    return env
