"""The skill library: optimisation techniques kept as one TOML file each under ``skills/data/``.

Techniques are data, not code, so that adding one is writing a file, the matcher can rank them
transparently, and generators can quote them in prompts. The files are validated strictly when
loaded (they are an edge: people edit them by hand), so a typo in a signal name is a clear error
naming the file and the field rather than a skill that silently never matches.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from openkernel.errors import ConfigError

__all__ = [
    "BACKENDS",
    "BOTTLENECKS",
    "DATA_DIR",
    "OP_CLASSES",
    "SIGNALS",
    "Skill",
    "load_skills",
]

DATA_DIR = Path(__file__).resolve().parent / "data"

# What limits a kernel, in the critic's words.
BOTTLENECKS: tuple[str, ...] = ("memory_bound", "compute_bound", "latency_bound", "under_utilised")

# Kinds of operation a technique applies to; "any" means the technique does not care.
OP_CLASSES: tuple[str, ...] = (
    "elementwise",
    "reduction",
    "softmax",
    "norm",
    "matmul",
    "conv",
    "attention",
    "any",
)

# Profile signals a diagnosis can name, each with the one-line meaning the critic and the skills share.
SIGNALS: dict[str, str] = {
    "low_dram_throughput": "achieved DRAM bandwidth is far below peak for a kernel that should stream memory",
    "low_l2_hit": "L2 hit rate is low, so tiles that could be reused are fetched from DRAM again",
    "low_occupancy": "few warps are resident per SM, too few to hide memory and pipeline latency",
    "register_spills": "registers spill to local memory, adding hidden global-memory traffic",
    "high_registers": "registers per thread are high enough to cap how many warps fit on an SM",
    "bank_conflicts": "shared-memory accesses hit the same bank and are serialised",
    "low_tensor_pipe": "tensor-core pipe utilisation is low for a matmul-like operation",
    "many_launches": "one forward call launches many kernels, so launch gaps dominate",
    "uncoalesced": "global loads or stores touch more 32-byte sectors per request than the data needs",
    "long_rows": "the reduced dimension is too long to keep a whole row in one program's registers",
    "small_problem": "the problem is too small to fill every SM with work",
    "tail_effect": "the last wave of blocks leaves many SMs idle",
    "high_stall_memory": "warps spend most cycles waiting on global-memory loads",
    "high_stall_barrier": "warps spend most cycles waiting at block-wide barriers",
}

# Languages an example can be written in.
BACKENDS: tuple[str, ...] = ("triton", "cuda")

_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_HARDWARE = re.compile(r"sm_[0-9]{2,3}a?")
_TOP_KEYS = ("id", "title", "summary", "what", "why", "typical_effect", "applies", "example")
_APPLIES_KEYS = ("bottlenecks", "op_classes", "signals", "hardware", "backends")


@dataclass(frozen=True)
class Skill:
    """One optimisation technique: when it applies, what it does, why it helps, and how it looks."""

    id: str
    title: str
    summary: str
    what: str
    why: str
    typical_effect: str
    bottlenecks: tuple[str, ...]
    op_classes: tuple[str, ...]
    signals: tuple[str, ...]
    hardware: tuple[str, ...]  # ("any",) or compute capabilities such as ("sm_90",)
    backends: tuple[str, ...]  # exactly the languages that have an example below
    triton_example: str | None
    cuda_example: str | None


def load_skills(directory: Path | None = None) -> tuple[Skill, ...]:
    """Every ``*.toml`` skill in ``directory`` (default: the packaged library), sorted by id.

    Cached per directory: the generators ask on every iteration and the files do not change under a run.
    """
    return _load_dir((directory or DATA_DIR).resolve())


@functools.lru_cache(maxsize=8)
def _load_dir(directory: Path) -> tuple[Skill, ...]:
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise ConfigError(f"no skill files (*.toml) in {directory}: point at the skills data folder")
    skills = [_load_file(path) for path in files]
    return tuple(sorted(skills, key=lambda s: s.id))


class _Fields:
    """Reads typed fields out of one parsed table, naming the file and field in every error."""

    def __init__(self, path: Path, table: dict[str, Any], prefix: str, allowed: tuple[str, ...]) -> None:
        self.path, self.table, self.prefix = path, table, prefix
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            self.fail(unknown[0], f"is not a known field (allowed: {', '.join(allowed)})")

    def fail(self, key: str, problem: str) -> NoReturn:
        raise ConfigError(f"skill file {self.path}: field '{self.prefix}{key}' {problem}")

    def get(self, key: str) -> object:
        if key not in self.table:
            self.fail(key, "is missing")
        return self.table[key]

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str) or not value.strip():
            self.fail(key, "must be a non-empty string")
        return value.strip()

    def code(self, key: str) -> str | None:
        """An optional example: kept as written (indentation matters), with one trailing newline."""
        if key not in self.table:
            return None
        self.text(key)  # the same check: a non-empty string
        return str(self.table[key]).rstrip() + "\n"

    def words(self, key: str, vocabulary: tuple[str, ...] | None, *, allow_empty: bool = False) -> tuple[str, ...]:
        value = self.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, "must be a list of strings")
        if not value and not allow_empty:
            self.fail(key, "must name at least one value")
        if len(set(value)) != len(value):
            self.fail(key, "repeats a value")
        for word in value:
            if vocabulary is not None and word not in vocabulary:
                self.fail(key, f"has unknown value {word!r} (known: {', '.join(vocabulary)})")
        return tuple(value)

    def table_at(self, key: str, allowed: tuple[str, ...]) -> _Fields:
        value = self.get(key)
        if not isinstance(value, dict):
            self.fail(key, f"must be a table ([{key}])")
        return _Fields(self.path, value, f"{self.prefix}{key}.", allowed)


def _load_file(path: Path) -> Skill:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"skill file {path}: not valid TOML ({err})") from None
    top = _Fields(path, raw, "", _TOP_KEYS)
    skill_id = top.text("id")
    if not _ID.fullmatch(skill_id) or skill_id != path.stem:
        top.fail("id", f"is {skill_id!r} but must be lowercase-hyphen and equal the file name {path.stem!r}")
    applies = top.table_at("applies", _APPLIES_KEYS)
    op_classes = applies.words("op_classes", OP_CLASSES)
    if "any" in op_classes and len(op_classes) > 1:
        applies.fail("op_classes", "lists 'any' with other classes; use 'any' alone")
    hardware = applies.words("hardware", None)
    if hardware != ("any",) and not all(_HARDWARE.fullmatch(h) for h in hardware):
        applies.fail("hardware", f"is {list(hardware)} but must be ['any'] or compute capabilities like 'sm_90'")
    backends = applies.words("backends", BACKENDS)
    example = top.table_at("example", BACKENDS)
    triton_example = example.code("triton")
    cuda_example = example.code("cuda")
    covered = tuple(b for b, code in (("triton", triton_example), ("cuda", cuda_example)) if code is not None)
    if not covered:
        example.fail("triton", "is missing: give a triton or a cuda example (or both)")
    if set(backends) != set(covered):
        applies.fail("backends", f"is {list(backends)} but the examples cover {list(covered)}")
    return Skill(
        id=skill_id,
        title=top.text("title"),
        summary=top.text("summary"),
        what=top.text("what"),
        why=top.text("why"),
        typical_effect=top.text("typical_effect"),
        bottlenecks=applies.words("bottlenecks", BOTTLENECKS),
        op_classes=op_classes,
        signals=applies.words("signals", tuple(SIGNALS), allow_empty=True),
        hardware=hardware,
        backends=backends,
        triton_example=triton_example,
        cuda_example=cuda_example,
    )
