"""``kernel-code config show [--json]`` and ``kernel-code config path``: the settings and where they live.

``show`` lists every setting with the layer it came from (default, user file, project file,
environment), so that "why is it using that?" has an answer. API keys are shown only as "set (from
...)" or "not set": their values never reach the terminal (``openkernel.settings.shown_value``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from openkernel.settings import (
    PROJECT_FILE,
    load_settings,
    project_config_path,
    setting_names,
    shown_value,
    user_config_path,
)

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser("config", help="show the settings and their sources")
    actions = parser.add_subparsers(
        dest="config_command", metavar="{show,path}", required=True, parser_class=type(parser)
    )
    show = actions.add_parser("show", help="every setting, its value and where it came from")
    show.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    actions.add_parser("path", help="the user and project config files, and whether they exist")
    return parser


def run(args: argparse.Namespace) -> int:
    return _show(args.json) if args.config_command == "show" else _path()


def _toml(value: str | int | float | bool | None) -> str:
    """A value as a config file would write it."""
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def _show(as_json: bool) -> int:
    settings = load_settings()
    names = setting_names()
    if as_json:
        payload = {
            "settings": {
                name: {
                    "value": shown_value(settings, name),
                    "source": {"kind": settings.sources[name].kind, "name": settings.sources[name].name},
                }
                for name in names
            },
            "files": [str(p) for p in settings.files],
        }
        sys.stdout.write(json.dumps(payload) + "\n")
        return 0
    width = max(len(name) for name in names)
    for name in names:
        value = shown_value(settings, name)
        if name.endswith(".api_key"):
            print(f"{name:<{width}}  {value}")  # the source is in the value: "set (from OPENAI_API_KEY)"
        else:
            print(f"{name:<{width}}  {_toml(value)}  ({settings.sources[name]})")
    return 0


def _path() -> int:
    user = user_config_path()
    print(f"user file     {user} ({'exists' if user.is_file() else 'not there'})")
    project = project_config_path()
    if project is None:
        suggested = Path.cwd() / PROJECT_FILE
        print(f"project file  none: no {PROJECT_FILE} here or in a parent folder (create {suggested})")
    else:
        print(f"project file  {project} (exists)")
    return 0
