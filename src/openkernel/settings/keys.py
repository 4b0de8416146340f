"""What each setting may hold, and reading settings from a TOML file or the environment.

``KEYS`` is the one table of settings: name ("section.key"), type, default, limits, an example for
error messages, and whether it is a secret. Readers return ``{name: (value, Source)}`` for the layer
they read, checked against the table; anything the table does not know is a one-line ConfigError.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from openkernel.errors import ConfigError
from openkernel.store import default_home

__all__ = [
    "BY_NAME",
    "DEFAULT",
    "ENV_PREFIX",
    "KEYS",
    "STANDARD_ENV",
    "BadValue",
    "Key",
    "Source",
    "convert",
    "defaults",
    "env_name",
    "not_value",
    "read_environment",
    "read_file",
    "setting_names",
]

ENV_PREFIX = "KERNEL_CODE_"
PROJECT_FILE = "kernel-code.toml"
# The providers' own variables, which their SDKs and other tools read too: variable -> setting.
STANDARD_ENV: Mapping[str, str] = {
    "OPENAI_API_KEY": "openai.api_key",
    "ANTHROPIC_API_KEY": "anthropic.api_key",
    "OPENAI_BASE_URL": "openai.base_url",
    "ANTHROPIC_BASE_URL": "anthropic.base_url",
}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

SourceKind = Literal["default", "user file", "project file", "env", "flag"]


@dataclass(frozen=True)
class Source:
    """Where a value came from."""

    kind: SourceKind
    name: str | None = None  # the file's path, the variable's or the flag's name; None for a default

    def __str__(self) -> str:
        return self.kind if self.name is None else f"{self.kind} {self.name}"


DEFAULT = Source("default")


# ----------------------------------------------------------------------------------- the key table

Kind = Literal["str", "int", "float", "bool", "path"]


@dataclass(frozen=True)
class Key:
    """One setting: its type, limits and default, and how an error message shows a valid value."""

    name: str  # "loop.iterations"
    kind: Kind
    example: str  # a valid value as TOML writes it, for error messages
    default: object = None  # None: unset (the settings' None), or computed in defaults()
    choices: tuple[str, ...] = ()
    minimum: int | None = None  # ints only: the smallest and largest allowed (floats must be > 0)
    maximum: int | None = None
    secret: bool = False

    def expected(self) -> str:
        if self.choices:
            return "one of " + ", ".join(f'"{c}"' for c in self.choices)
        if self.kind == "int" and self.maximum is not None:
            return f"a whole number from {self.minimum} to {self.maximum}"
        if self.kind == "int":
            return f"a whole number >= {self.minimum}"
        return {"str": "a string", "float": "a number > 0", "bool": "true or false", "path": "a path (a string)"}[
            self.kind
        ]


KEYS: tuple[Key, ...] = (
    Key("loop.model", "str", '"openai:gpt-4.1"'),
    Key("loop.backend", "str", '"triton"', "triton", choices=("triton", "cuda")),
    Key("loop.iterations", "int", "10", 10, minimum=1),
    Key("loop.wall_time_budget_s", "float", "3600"),
    Key("loop.token_budget", "int", "2000000", minimum=1),
    Key("loop.cost_budget_usd", "float", "5.0"),
    Key("evaluate.timeout_s", "float", "300", 300.0),
    Key("evaluate.size", "str", '"auto"', "auto", choices=("auto", "full", "small")),
    Key("sessions.home", "path", '"~/kernel-sessions"'),
    *(
        Key(f"{provider}.{key}", "str", example, secret=key == "api_key")
        for provider in ("openai", "anthropic")
        for key, example in (("api_key", '"..."'), ("base_url", '"http://localhost:8000/v1"'), ("model", '"NAME"'))
    ),
    Key("prices.file", "path", '"~/.config/kernel-code/prices.toml"'),
    Key("traces.enabled", "bool", "true", False),
    Key("traces.dir", "path", '"~/kernel-traces"'),
    Key("dashboard.host", "str", '"127.0.0.1"', "127.0.0.1"),
    Key("dashboard.port", "int", "8050", 8050, minimum=1, maximum=65535),
)
BY_NAME: Mapping[str, Key] = {k.name: k for k in KEYS}


def setting_names() -> tuple[str, ...]:
    """Every setting, "section.key", in the order ``config show`` lists them."""
    return tuple(BY_NAME)


def env_name(name: str) -> str:
    """The variable that sets ``name``: "loop.iterations" -> KERNEL_CODE_LOOP_ITERATIONS."""
    return ENV_PREFIX + name.replace(".", "_").upper()


def defaults() -> dict[str, object]:
    """Every setting's built-in value."""
    values = {k.name: k.default for k in KEYS}
    values["sessions.home"] = default_home()
    values["traces.dir"] = default_home().parent / "traces"  # beside the sessions, in the user's data dir
    return values


# ------------------------------------------------------------------------------------------ parsing


class BadValue(Exception):
    """A value of the wrong type or range; the caller says where it was."""


def convert(key: Key, value: object, base: Path) -> object:
    """A TOML value (or a flag's) as the setting's type; relative paths are taken from ``base``."""
    if key.kind == "bool" and isinstance(value, bool):
        return value
    if key.kind == "int" and isinstance(value, int) and not isinstance(value, bool) and _in_range(key, value):
        return value
    finite = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if key.kind == "float" and finite and isinstance(value, int | float) and value > 0:
        return float(value)
    if key.kind == "str" and isinstance(value, str) and value.strip() and (not key.choices or value in key.choices):
        return value
    if key.kind == "path" and isinstance(value, str | Path) and str(value).strip():
        path = Path(value).expanduser()
        return path if path.is_absolute() else base / path
    raise BadValue


def _in_range(key: Key, value: int) -> bool:
    return (key.minimum is None or value >= key.minimum) and (key.maximum is None or value <= key.maximum)


def _from_text(key: Key, text: str, base: Path) -> object:
    """An environment variable's text as the setting's type."""
    value: object = text.strip()
    try:
        if key.kind == "int":
            value = int(text)
        elif key.kind == "float":
            value = float(text)
        elif key.kind == "bool":
            lowered = text.strip().lower()
            if lowered not in _TRUE + _FALSE:
                raise BadValue
            value = lowered in _TRUE
    except ValueError:
        raise BadValue from None
    return convert(key, value, base)


def not_value(key: Key, value: object) -> str:
    """ ", not <value>" for an error message; nothing for a secret, whose value is never shown."""
    return "" if key.secret else f", not {value!r}"


def _suggest(wrong: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(wrong, choices, n=1)
    return f"did you mean {close[0]}? " if close else ""


def read_file(path: Path, source: Source) -> dict[str, tuple[object, Source]]:
    """The settings in one TOML file, checked, with relative paths taken from the file's folder."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it ({err.strerror}): fix its permissions or remove it") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML ({err}): fix that line") from None
    found: dict[str, tuple[object, Source]] = {}
    sections = sorted({name.split(".")[0] for name in BY_NAME})
    for section, table in data.items():
        if not isinstance(table, dict):
            homes = [s for s in sections if f"{s}.{section}" in BY_NAME]
            fix = f"put it under [{homes[0]}]" if len(homes) == 1 else f"use a section: {', '.join(sections)}"
            raise ConfigError(f"{path}: {section} is not inside a section: {fix}")
        if section not in sections:
            raise ConfigError(
                f"{path}: unknown section [{section}]: {_suggest(section, sections)}"
                f"the sections are {', '.join(f'[{s}]' for s in sections)}"
            )
        keys = [name.split(".")[1] for name in BY_NAME if name.startswith(section + ".")]
        for key_name, value in table.items():
            name = f"{section}.{key_name}"
            key = BY_NAME.get(name)
            if key is None:
                raise ConfigError(
                    f"{path}: [{section}] {key_name} is not a setting: {_suggest(key_name, keys)}"
                    f"the keys of [{section}] are {', '.join(keys)}"
                )
            try:
                found[name] = (convert(key, value, path.parent), source)
            except BadValue:
                raise ConfigError(
                    f"{path}: [{section}] {key_name} must be {key.expected()}{not_value(key, value)}: "
                    f"write it like {key_name} = {key.example}"
                ) from None
    return found


def read_environment(environ: Mapping[str, str], cwd: Path) -> dict[str, tuple[object, Source]]:
    """The settings in the environment: the providers' own variables first, then KERNEL_CODE_*."""
    by_env = {env_name(name): name for name in BY_NAME}
    variables = [v for v in STANDARD_ENV if v in environ]
    variables += sorted(v for v in environ if v.startswith(ENV_PREFIX))
    found: dict[str, tuple[object, Source]] = {}
    for variable in variables:
        name = STANDARD_ENV.get(variable) or by_env.get(variable)
        if name is None:
            raise ConfigError(
                f"{variable} is not a setting: {_suggest(variable, sorted(by_env))}"
                "unset it (kernel-code config show lists every setting)"
            )
        text = environ[variable]
        if not text.strip():
            continue  # an empty variable is an unset one, as shells use it
        key = BY_NAME[name]
        try:
            found[name] = (_from_text(key, text, cwd), Source("env", variable))
        except BadValue:
            example = key.example.strip('"')
            raise ConfigError(
                f"{variable} must be {key.expected()}{not_value(key, text)}: set it like {variable}={example}"
            ) from None
    return found
