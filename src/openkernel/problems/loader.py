"""Find and check problem files: a path, a folder, a bundled name, a KernelBench id (``L1#23``) or level (``L1``).

The check is static (``ast``): the parent never runs problem code, so a broken file is reported
before any worker starts, with a message that says what to add.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path

from openkernel.errors import BadProblem, ProblemNotFound
from openkernel.types import Problem

__all__ = [
    "bundled_dir",
    "bundled_names",
    "load_kernelbench_level",
    "load_problem",
    "load_problems",
    "parse_kernelbench_id",
    "parse_kernelbench_level",
    "resolve_problems",
]

_KB_ID = re.compile(r"^L(?P<level>\d+)#(?P<id>\d+)$", re.IGNORECASE)
_KB_LEVEL = re.compile(r"^L(?P<level>\d+)$", re.IGNORECASE)
_KB_FILE = re.compile(r"^(?P<id>\d+)_.*\.py$")
_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def bundled_dir() -> Path:
    return Path(__file__).resolve().parent / "bundled"


def bundled_names() -> list[str]:
    return sorted(p.stem for p in bundled_dir().glob("*.py") if not p.name.startswith("_"))


def parse_kernelbench_id(spec: str) -> tuple[int, int] | None:
    """``"L1#23"`` -> ``(1, 23)``; anything else -> ``None``."""
    m = _KB_ID.match(spec.strip())
    return (int(m["level"]), int(m["id"])) if m else None


def parse_kernelbench_level(spec: str) -> int | None:
    """``"L1"`` -> ``1``; anything else -> ``None``."""
    m = _KB_LEVEL.match(spec.strip())
    return int(m["level"]) if m else None


def load_problem(spec: str | Path, kernelbench: Path | None = None) -> Problem:
    """Resolve ``spec`` (file path, bundled name, or ``L<level>#<id>`` with ``kernelbench``)."""
    text = str(spec)
    kb = parse_kernelbench_id(text)
    if kb is not None:
        if kernelbench is None:
            raise ProblemNotFound(f"{text} is a KernelBench id: pass --kernelbench PATH (a KernelBench checkout)")
        path = _kernelbench_file(kernelbench, *kb)
        return _checked(path, name=f"L{kb[0]}#{kb[1]}", source="kernelbench")
    path = Path(text).expanduser()
    if path.is_file():
        return _checked(path.resolve(), name=path.stem, source="file")
    if path.is_dir():
        raise ProblemNotFound(f"{text} is a folder: name one problem file in it (or use load_problems for all)")
    bundled = bundled_dir() / f"{text}.py"
    if "/" not in text and bundled.is_file():
        return _checked(bundled, name=text, source="bundled")
    known = ", ".join(bundled_names())
    raise ProblemNotFound(f"no problem file or bundled problem named {text!r}: give a path, or one of: {known}")


def load_problems(folder: Path) -> list[Problem]:
    """Every problem file in a folder (sorted by name); files that break the contract raise."""
    if not folder.is_dir():
        raise ProblemNotFound(f"{folder} is not a folder")
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ProblemNotFound(f"{folder} holds no .py problem files")
    return [_checked(p.resolve(), name=p.stem, source="file") for p in files]


def load_kernelbench_level(root: Path, level: int) -> list[Problem]:
    """Every problem of ``level`` in a KernelBench checkout, by id (``L1#1``, ``L1#2``, ...)."""
    level_dir = _kernelbench_level_dir(root, level)
    files = {int(m["id"]): p for p in level_dir.glob("*.py") if (m := _KB_FILE.match(p.name))}
    if not files:
        raise ProblemNotFound(f"KernelBench level {level} holds no problem files in {level_dir}")
    return [_checked(files[i].resolve(), name=f"L{level}#{i}", source="kernelbench") for i in sorted(files)]


def resolve_problems(specs: Sequence[str | Path], kernelbench: Path | None = None) -> list[Problem]:
    """Every problem the specs name, in order: files, folders (each problem file in them), bundled names,
    KernelBench ids (``L1#23``) and levels (``L1``, every problem of level 1). A name met twice is a
    ``BadProblem`` unless both are the same file (which is then kept once)."""
    found: dict[str, Problem] = {}
    for spec in specs:
        text = str(spec)
        level = parse_kernelbench_level(text)
        if level is not None:
            if kernelbench is None:
                raise ProblemNotFound(
                    f"{text} is a KernelBench level: pass --kernelbench PATH (a KernelBench checkout)"
                )
            problems = load_kernelbench_level(kernelbench, level)
        elif Path(text).expanduser().is_dir():
            problems = load_problems(Path(text).expanduser())
        else:
            problems = [load_problem(text, kernelbench)]
        for problem in problems:
            seen = found.setdefault(problem.name, problem)
            if seen.path != problem.path:
                raise BadProblem(
                    f"two problems are named {problem.name!r} ({seen.path} and {problem.path}): "
                    "rename one of the files, names must be unique in one run"
                )
    if not found:
        raise ProblemNotFound("no problems were named: give files, folders, bundled names or KernelBench ids")
    return list(found.values())


def _kernelbench_level_dir(root: Path, level: int) -> Path:
    root = root.expanduser()
    for base in (root / "KernelBench", root):
        level_dir = base / f"level{level}"
        if level_dir.is_dir():
            return level_dir
    raise ProblemNotFound(f"{root} is not a KernelBench checkout: no level{level}/ or KernelBench/level{level}/ in it")


def _kernelbench_file(root: Path, level: int, problem_id: int) -> Path:
    level_dir = _kernelbench_level_dir(root, level)
    matches = sorted(level_dir.glob(f"{problem_id}_*.py"))
    if matches:
        return matches[0].resolve()
    raise ProblemNotFound(f"KernelBench level {level} has no problem {problem_id} in {level_dir}")


def _checked(path: Path, name: str, source: str) -> Problem:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise BadProblem(f"{path}:{exc.lineno}: syntax error in the problem file: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemNotFound(f"cannot read {path}: {exc}") from None
    defined = {
        node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    defined |= {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    missing = [n for n in _REQUIRED if n not in defined]
    if missing:
        raise BadProblem(
            f"{path} is not a KernelBench problem: it does not define {', '.join(missing)} "
            "(a problem defines class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    return Problem(name=name, path=path, small_sizes=_small_sizes(tree, path), source=source)


def _small_sizes(tree: ast.Module, path: Path) -> tuple[tuple[str, int | float], ...]:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "SMALL_SIZES"
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise BadProblem(f"{path}: SMALL_SIZES must be a literal dict of numbers") from None
            ok = isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) for k, v in value.items()
            )
            if not ok:
                raise BadProblem(f"{path}: SMALL_SIZES must map constant names to numbers, e.g. {{'dim': 512}}")
            return tuple(sorted(value.items()))
    return ()
