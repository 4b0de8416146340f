"""From graph nodes to Triton lines: one op's expression, and a whole chain in straight-line code.

Every node gets a variable named after its op (``gelu``, ``row_max``, ``total``), so the emitted
kernel reads like a hand-written one; loads are named after the tensor they read (``x``,
``weight``). A :class:`Layout` says how a value of each kind is indexed: along one row (a
``[BLOCK]`` vector, per-row values are scalars), as a ``[ROWS, BLOCK]`` tile (per-column values
broadcast with ``[None, :]``, per-row ones with ``[:, None]``), or as a flat run of elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from openkernel.generate.offline.graph import REDUCTIONS, Node
from openkernel.generate.offline.trace import Source

__all__ = ["HELPERS", "Layout", "Namer", "constant", "emit_chain", "helpers_used", "load_line", "reduce_expr"]

# Each pointwise op's Triton expression; operands are always names or literals, so no parentheses are needed.
_FORMAT: dict[str, str] = {
    "neg": "-{0}",
    "abs": "tl.abs({0})",
    **{op: f"tl.{op}({{0}})" for op in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf")},
    **{op: f"tl.{op}({{0}})" for op in ("floor", "ceil", "sigmoid")},
    "trunc": "tl.where({0} >= 0, tl.floor({0}), tl.ceil({0}))",
    "tanh": "_tanh({0})",
    "relu": "tl.maximum({0}, 0.0)",
    "silu": "{0} * tl.sigmoid({0})",
    "mish": "{0} * _tanh(_softplus({0}, 1.0, 20.0))",
    "hardswish": "{0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0",
    "hardsigmoid": "tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
    "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, 0.0))",
    "reciprocal": "1.0 / {0}",
    "expm1": "tl.exp({0}) - 1.0",
    "log1p": "tl.log(1.0 + {0})",
    "not": "{0} == 0",
    "gelu": "0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))",  # exact (erf) GELU, as nn.GELU()
    "gelu_tanh": "0.5 * {0} * (1.0 + _tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})))",
    "softplus": "_softplus({0}, {1}, {2})",
    "leaky_relu": "tl.where({0} > 0, {0}, {0} * {1})",
    "elu": "tl.where({0} > 0, {0} * {2}, (tl.exp({0} * {3}) - 1.0) * {1} * {2})",
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "max2": "tl.maximum({0}, {1})",
    "min2": "tl.minimum({0}, {1})",
    "gt": "{0} > {1}",
    "ge": "{0} >= {1}",
    "lt": "{0} < {1}",
    "le": "{0} <= {1}",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "and": "{0} & {1}",
    "or": "{0} | {1}",
    "where": "tl.where({0}, {1}, {2})",
    "powf": "tl.exp2({1} * tl.log2({0}))",
}
# Small @triton.jit helpers the expressions above call, emitted once when used.
HELPERS: dict[str, str] = {
    "_tanh": """@triton.jit
def _tanh(x):
    # tanh from exp of a non-positive number: no overflow, and exactly +-1 far from zero.
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)
""",
    "_softplus": """@triton.jit
def _softplus(x, beta, threshold):
    # log(1 + exp(beta * x)) / beta, and x itself where beta * x passes the threshold (as torch).
    return tl.where(x * beta > threshold, x, tl.log(1.0 + tl.exp(x * beta)) / beta)
""",
}
# Variable names for ops whose own name would shadow a builtin or read badly.
_NAMES = {
    "sum": "total",
    "max": "row_max",
    "min": "row_min",
    "argmax": "index",
    "argmin": "index",
    "abs": "magnitude",
    "max2": "maximum",
    "min2": "minimum",
    "and": "both",
    "or": "either",
    "not": "negated",
    "round": "rounded",
    "to_fp": "as_float",
    "where": "chosen",
    "powf": "power",
    "div": "ratio",
    "sub": "diff",
    "mul": "prod",
    "add": "added",
}
_RESERVED_NAMES = (
    "row rows cols mask col_mask row_mask offs pid acc n_cols n_rows n_elements start out out_ptr tl triton torch "
    "math nn self shape block grid num_warps num_stages rows_per_program sms BLOCK ROWS M N K m n k lhs rhs r "
    "outer inner inner_mask base red n_outer n_red n_inner block_r block_i BLOCK_R BLOCK_I"
)
RESERVED = frozenset(_RESERVED_NAMES.split())


def constant(value: float) -> str:
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if math.isnan(value):
        return 'float("nan")'
    return repr(float(value))


class Namer:
    """Fresh, readable variable names: ``gelu``, then ``gelu_1``; never a reserved or used one."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken = set(RESERVED) | (taken or set())

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


@dataclass(frozen=True)
class Layout:
    """How values of each kind are indexed in one kernel body."""

    shape: str  # "row" ([BLOCK] of one row), "tile" ([ROWS, BLOCK]), "flat" (elements), "strided" ([BLOCK_R, BLOCK_I])
    row: str = "row"  # the row index (row layout), or the [ROWS] vector of row indices (tile)
    cols: str = "cols"  # column indices; the element offsets in the flat layout
    mask: str = "mask"  # a full value's mask
    col_mask: str = "mask"  # a per-column value's mask
    row_mask: str = ""  # a per-row value's mask (tile only)
    ncols: str = "n_cols"  # the row length
    compute: str = "float32"  # the dtype all arithmetic runs in
    # Cache hints ("" for none): "first" lets a full value's lines leave L2 first (read once, streamed),
    # "last" keeps them (a later loop over the row reads them again). Per-column and per-row values are
    # read by every program, so with any hint they are kept ("evict_last").
    evict: str = ""

    def eviction(self, kind: str) -> str:
        """The load's ``eviction_policy`` argument for a value of ``kind``, or "" for none."""
        if not self.evict or kind == "scal":
            return ""
        return f', eviction_policy="evict_{self.evict if kind == "full" else "last"}"'

    @property
    def axis(self) -> int:
        return 1 if self.shape == "tile" else 0

    def fit(self, name: str, kind: str, to_kind: str) -> str:
        """``name`` (of ``kind``) broadcast into a value of ``to_kind``: tiles need explicit axes."""
        if self.shape != "tile" or to_kind != "full" or kind in ("full", "scal"):
            return name
        return f"{name}[None, :]" if kind == "feat" else f"{name}[:, None]"

    def address(self, ptr: str, kind: str) -> tuple[str, str | None]:
        """The pointer expression and mask for loading a value of ``kind``."""
        if kind == "scal":
            return ptr, None
        if kind == "feat":
            return f"{ptr} + {self.cols}", self.col_mask
        if kind == "row":
            return f"{ptr} + {self.row}", (self.row_mask or None)
        if self.shape == "flat":
            return f"{ptr} + {self.cols}", self.mask
        if self.shape == "strided":
            return f"{ptr} + base + red[:, None] * n_inner + {self.cols}[None, :]", self.mask
        if self.shape == "tile":
            return f"{ptr} + {self.row}[:, None] * {self.ncols} + {self.cols}[None, :]", self.mask
        return f"{ptr} + {self.row} * {self.ncols} + {self.cols}", self.mask


def load_line(name: str, ptr: str, kind: str, source: Source, layout: Layout) -> str:
    """``x = tl.load(...)``, cast to the compute dtype when the tensor holds another."""
    address, mask = layout.address(ptr, kind)
    hint = layout.eviction(kind)
    call = f"tl.load({address}, mask={mask}, other=0.0{hint})" if mask else f"tl.load({address}{hint})"
    dtype = str(source.meta.dtype).removeprefix("torch.")
    cast = f".to(tl.{layout.compute})" if dtype != layout.compute else ""
    return f"{name} = {call}{cast}"


def reduce_expr(node: Node, value: str, is_load: bool, layout: Layout) -> str:
    """A whole-row reduction of ``value``: masked lanes get the op's neutral element first."""
    neutral = {"sum": "0.0", "max": 'float("-inf")', "argmax": 'float("-inf")'}.get(node.op, 'float("inf")')
    masked = value if node.op == "sum" and is_load else f"tl.where({layout.mask}, {value}, {neutral})"
    fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min", "argmax": "tl.argmax", "argmin": "tl.argmin"}[node.op]
    return f"{fn}({masked}, axis={layout.axis})"


def op_expr(node: Node, args: list[str], layout: Layout) -> str:
    if node.op == "round":
        return f"{args[0]}.to(tl.{node.attr}).to(tl.{layout.compute})"
    if node.op == "to_fp":
        return f"{args[0]}.to(tl.{layout.compute})"
    return _FORMAT[node.op].format(*args)


def helpers_used(nodes: list[Node]) -> list[str]:
    text = " ".join(_FORMAT.get(n.op, "") for n in nodes)
    used = {name for name in HELPERS if name + "(" in text}
    if "_softplus(" in text or "mish" in {n.op for n in nodes}:
        used.add("_softplus")
    return sorted(used)


def var_name(node: Node, source_names: dict[int, str]) -> str:
    if node.op == "load":
        return source_names[int(node.attr or 0)]
    return _NAMES.get(node.op, node.op)


def emit_chain(
    nodes: tuple[Node, ...] | list[Node],
    ids: list[int],
    layout: Layout,
    names: dict[int, str],
    namer: Namer,
    source_names: dict[int, str],
    sources: tuple[Source, ...],
) -> list[str]:
    """Lines computing ``ids`` (in order) in straight-line code; ``names`` gains each value's expression.

    Reductions are whole-row (the one-pass form); values already in ``names`` are not recomputed.
    """
    lines: list[str] = []
    for i in ids:
        if i in names:
            continue
        node = nodes[i]
        if node.op == "const":
            names[i] = constant(float(node.attr or 0.0))
            continue
        if node.op == "ncols":
            names[i] = layout.ncols
            continue
        if node.op == "load":  # named after its tensor (unique already)
            name = source_names[int(node.attr or 0)]
        elif node.op == "div" and nodes[node.args[1]].op == "ncols":
            name = namer.fresh("mean")
        else:
            name = namer.fresh(var_name(node, source_names))
        if node.op == "load":
            index = int(node.attr or 0)
            lines.append(load_line(name, f"{source_names[index]}_ptr", node.kind, sources[index], layout))
        elif node.op in REDUCTIONS:
            arg = nodes[node.args[0]]
            lines.append(f"{name} = {reduce_expr(node, names[node.args[0]], arg.op == 'load', layout)}")
        else:
            args = [layout.fit(names[a], nodes[a].kind, node.kind) for a in node.args]
            lines.append(f"{name} = {op_expr(node, args, layout)}")
        names[i] = name
    return lines
