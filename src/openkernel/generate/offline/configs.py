"""Launch configurations: each template family's search space, its best guess, and the readable tags.

A :class:`Config` is one point of a family's space, its knobs in the family's axis order. The
space is finite (every axis is a short ordered list) and pruned of configurations that cannot
work on the target (an H200: 227 KiB of shared memory per block, 255 registers per thread) or
that make no sense (more threads than elements). The first guess follows what measured well on
an H200 for memory-bound kernels: one program per row with the whole row in registers when it
fits, warps scaled with the block, and 128-wide tensor-core tiles for matmuls.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from openkernel.generate.offline.patterns import MatmulPlan, Plan, RowPlan

__all__ = ["AXES", "Config", "auto_warps", "default_config", "family_of", "next_power_of_2", "resolve", "space"]

Knob = int | str
# Family -> (axis, its values in order). "auto" BLOCK: next_power_of_2(n_cols); "auto" warps: scaled with it.
# "evict": cache hints on the loads, as torch.compile writes them: data read once leaves L2 first, data a
# later loop reads again and per-column weights stay (the looped variant's first loops keep the row for
# the output loop). A tag without an axis added later (written before it existed) takes its first value.
AXES: dict[str, tuple[tuple[str, tuple[Knob, ...]], ...]] = {
    "row": (
        ("variant", ("one_pass", "looped")),
        ("BLOCK", ("auto", 256, 512, 1024, 2048, 4096, 8192, 16384)),
        ("warps", ("auto", 1, 2, 4, 8, 16, 32)),
        ("ROWS", (1, 2, 4, 8, 16)),
        ("persistent", ("no", "yes")),
        ("evict", ("none", "hints")),
    ),
    "pointwise": (
        ("BLOCK", (256, 512, 1024, 2048, 4096, 8192, 16384)),
        ("warps", (1, 2, 4, 8, 16)),
        ("evict", ("none", "hints")),
    ),
    "tiled": (
        ("BLOCK", (64, 128, 256, 512, 1024, 2048, 4096, 8192)),
        ("ROWS", (1, 2, 4, 8, 16)),
        ("warps", (1, 2, 4, 8, 16)),
        ("evict", ("none", "hints")),
    ),
    "strided": (
        ("BLOCK_R", (1, 2, 4, 8, 16, 32, 64)),
        ("BLOCK_I", (16, 32, 64, 128, 256, 512, 1024)),
        ("warps", (1, 2, 4, 8)),
    ),
    "matmul": (
        ("BLOCK_M", (32, 64, 128, 256)),
        ("BLOCK_N", (32, 64, 128, 256)),
        ("BLOCK_K", (16, 32, 64, 128)),
        ("warps", (2, 4, 8, 16)),
        ("stages", (1, 2, 3, 4, 5)),
        ("GROUP_M", (1, 4, 8, 16)),
    ),
}
_LATER = frozenset({"evict"})  # axes added after tags were first recorded: missing means the first value
SHARED_BYTES_LIMIT = 232_448  # per block on an H100/H200 (227 KiB)
MAX_ACC_PER_THREAD = 128  # fp32 accumulator registers per thread: past this a matmul tile spills
MAX_ROW_ELEMENTS = 32_768  # elements one program holds in registers (ROWS x BLOCK), one-pass
MAX_ONE_PASS_BLOCK = 16_384  # longer rows are looped by default


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class Config:
    family: str  # "row", "pointwise", "tiled" or "matmul"
    knobs: tuple[tuple[str, Knob], ...]  # in AXES[family] order

    def __getitem__(self, name: str) -> Knob:
        return dict(self.knobs)[name]

    def with_(self, **changes: Knob) -> Config:
        return Config(self.family, tuple((k, changes.get(k, v)) for k, v in self.knobs))

    def tag(self) -> str:
        """``variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no``: the parseable form."""
        return " ".join(f"{k}={v}" for k, v in self.knobs)

    @staticmethod
    def parse(family: str, text: str) -> Config | None:
        """The config a ``tag()`` names, or None when it is not one of ``family``'s."""
        try:
            pairs = dict(item.split("=", 1) for item in text.split())
        except ValueError:
            return None
        axes = AXES.get(family, ())
        if not axes or not set(pairs) <= {axis for axis, _ in axes}:
            return None
        knobs: list[tuple[str, Knob]] = []
        for axis, values in axes:
            value = pairs.get(axis, str(values[0]) if axis in _LATER else None)
            match = [v for v in values if str(v) == value]
            if not match:
                return None
            knobs.append((axis, match[0]))
        return Config(family, tuple(knobs))

    def index(self, axis: str) -> int:
        return dict(AXES[self.family])[axis].index(self[axis])


def family_of(plan: Plan) -> str:
    if isinstance(plan, MatmulPlan):
        return "matmul"
    if plan.frame.strided:
        return "strided"
    if plan.reductions:
        return "row"
    kinds = {plan.nodes[i].kind for i in plan.live() if plan.nodes[i].op == "load"}
    return "tiled" if kinds & {"feat", "row"} else "pointwise"


def _make(family: str, **knobs: Knob) -> Config:
    return Config(family, tuple((axis, knobs[axis]) for axis, _ in AXES[family]))


def default_config(plan: Plan) -> Config:
    """The best guess at the traced (full) size, before any measurement."""
    family = family_of(plan)
    if isinstance(plan, MatmulPlan):
        half = plan.in_dtype in (torch.float16, torch.bfloat16)
        # fp16/bf16: 128 x 256 x 64 tensor-core tiles, 3 stages (what measured best on the H200); fp32 at
        # ieee precision runs on the FMA units: 128 x 128 x 32.
        bm = min(128, max(32, next_power_of_2(plan.m)))
        bn = min(256 if half else 128, max(32, next_power_of_2(plan.n)))
        return _make(family, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64 if half else 32, warps=8, stages=3, GROUP_M=8)
    assert isinstance(plan, RowPlan)
    block = next_power_of_2(plan.n_cols)
    if family == "pointwise":
        return _make(family, BLOCK=4096, warps=8, evict="none")
    if family == "strided":  # [BLOCK_R, BLOCK_I] tiles: contiguous inner columns, the reduced dimension looped
        inner = min(128, max(16, next_power_of_2(math.prod(plan.frame.inner))))
        return _make(family, BLOCK_R=min(64, max(1, 4096 // inner), block), BLOCK_I=inner, warps=4)
    if family == "tiled":
        cols = min(4096, max(64, block))
        rows = max(1, min(16, 2048 // cols))
        return _make(family, BLOCK=cols, ROWS=rows, warps=8 if rows * cols >= 2048 else 4, evict="none")
    if block > MAX_ONE_PASS_BLOCK:
        return _make(family, variant="looped", BLOCK=4096, warps=8, ROWS=1, persistent="no", evict="none")
    rows = 1 if block >= 2048 else max(1, min(16, 2048 // block))
    return _make(family, variant="one_pass", BLOCK="auto", warps="auto", ROWS=rows, persistent="no", evict="none")


def _valid(plan: Plan, c: Config) -> bool:
    if isinstance(plan, MatmulPlan):
        item = plan.in_dtype.itemsize
        shared = (int(c["BLOCK_M"]) + int(c["BLOCK_N"])) * int(c["BLOCK_K"]) * item * int(c["stages"])
        threads = 32 * int(c["warps"])
        fits = shared <= SHARED_BYTES_LIMIT and int(c["BLOCK_M"]) * int(c["BLOCK_N"]) // threads <= MAX_ACC_PER_THREAD
        sized = int(c["BLOCK_M"]) <= max(32, 2 * next_power_of_2(plan.m)) and int(c["BLOCK_N"]) <= max(
            32, 2 * next_power_of_2(plan.n)
        )
        return fits and sized and int(c["BLOCK_K"]) <= max(16, next_power_of_2(plan.k))
    assert isinstance(plan, RowPlan)
    block = next_power_of_2(plan.n_cols)
    warps = c["warps"]
    if c.family == "pointwise":
        return 32 * int(warps) <= int(c["BLOCK"])
    if c.family == "strided":
        tile = int(c["BLOCK_R"]) * int(c["BLOCK_I"])
        inner = next_power_of_2(math.prod(plan.frame.inner))
        return (
            tile <= 8192
            and 32 * int(warps) <= tile
            and int(c["BLOCK_R"]) <= block
            and int(c["BLOCK_I"]) <= max(16, 2 * inner)
        )
    if c.family == "tiled":
        elements = int(c["ROWS"]) * int(c["BLOCK"])
        return elements <= 16_384 and 32 * int(warps) <= elements and int(c["BLOCK"]) <= max(64, block)
    if c["variant"] == "one_pass":
        elements = int(c["ROWS"]) * block
        ok = c["BLOCK"] == "auto" and elements <= MAX_ROW_ELEMENTS and block <= MAX_ONE_PASS_BLOCK * 2
        return ok and (warps == "auto" or 32 * int(warps) <= elements) and (c["ROWS"] == 1 or block <= 4096)
    chunk = c["BLOCK"]
    return (
        chunk != "auto" and int(chunk) < block and c["ROWS"] == 1 and (warps == "auto" or 32 * int(warps) <= int(chunk))
    )


def space(plan: Plan) -> list[Config]:
    """Every valid configuration of the plan's family, in axis order."""
    family = family_of(plan)
    axes = AXES[family]
    found = []
    for values in itertools.product(*(v for _, v in axes)):
        config = Config(family, tuple(zip((a for a, _ in axes), values, strict=True)))
        if _valid(plan, config):
            found.append(config)
    return found


def auto_warps(elements: int) -> int:
    """The warps a one-pass row kernel uses for ``elements`` per program (the emitted code's policy)."""
    return 4 if elements <= 2048 else 8 if elements <= 8192 else 16


def resolve(plan: Plan, config: Config) -> Config:
    """``config`` with its "auto" knobs as the numbers they mean at the traced size (for comparisons)."""
    if config.family != "row" or not isinstance(plan, RowPlan):
        return config
    block = next_power_of_2(plan.n_cols)
    if config["variant"] == "looped":
        chunk = min(int(config["BLOCK"]), block)
        return config.with_(warps=4 if chunk <= 1024 else 8) if config["warps"] == "auto" else config
    warps = auto_warps(int(config["ROWS"]) * block) if config["warps"] == "auto" else config["warps"]
    return config.with_(warps=warps)
