"""The ATen ops the offline templates cover, each with its rewrite into graph nodes.

A pointwise op becomes one node (``gelu``) or a short expression (``hardtanh`` is a max then a min);
a composite op becomes the arithmetic it stands for (``_softmax`` is a row max, an exp, a row sum and
a divide; ``native_layer_norm`` is a mean, a centred sum of squares and an affine step). Handlers
return a node id, or a tuple of them for an op with several results (``max.dim``: values, indices).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from openkernel.generate.offline.trace import ADVICE, Arg, OpCall, Ref, Uncovered

if TYPE_CHECKING:
    from openkernel.generate.offline.lower import Lowering

__all__ = [
    "BINARY",
    "BOOL_OPS",
    "FLOAT_DTYPES",
    "HANDLERS",
    "REDUCING_OPS",
    "UNARY",
    "VIEW_OPS",
    "Id",
    "covered",
    "uncovered",
]

FLOAT_DTYPES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}
_VIEW_NAMES = "view _unsafe_view reshape expand unsqueeze squeeze detach alias clone contiguous lift_fresh_copy t "
_VIEW_NAMES += "transpose permute"
VIEW_OPS = frozenset(f"aten.{n}" for n in _VIEW_NAMES.split())
# Ops that reduce along dimensions (directly, or inside a composite op).
_REDUCING_NAMES = (
    "sum mean amax amin max min argmax argmin var std linalg_vector_norm norm logsumexp _softmax _log_softmax "
    "_safe_softmax native_layer_norm rms_norm _fused_rms_norm"
)
REDUCING_OPS = frozenset(f"aten.{n}" for n in _REDUCING_NAMES.split())
# aten op -> the graph's unary op of the same meaning.
_UNARY_NAMES = (
    "neg abs exp exp2 log log2 sqrt rsqrt sin cos erf floor ceil trunc sigmoid tanh relu silu mish hardswish "
    "hardsigmoid sign reciprocal expm1 log1p"
)
UNARY = {**{f"aten.{n}": n for n in _UNARY_NAMES.split()}, "aten.logical_not": "not"}
BINARY = {
    "aten.mul": "mul",
    "aten.maximum": "max2",
    "aten.minimum": "min2",
    **{f"aten.{n}": n for n in ["gt", "ge", "lt", "le", "eq", "ne"]},
    "aten.logical_and": "and",
    "aten.logical_or": "or",
}


@dataclass(frozen=True)
class Id:
    """An operand that is already a graph node (as opposed to a traced value or a Python number)."""

    node: int


def covered(packet: str) -> bool:
    """Whether the lowering knows ``packet`` (or its functional form, for an in-place ``add_``)."""
    known = packet in VIEW_OPS or packet in UNARY or packet in BINARY or packet in HANDLERS or packet == "getitem"
    return known or (packet.endswith("_") and covered(packet[:-1]))


def uncovered(op: str) -> Uncovered:
    return Uncovered(f"no offline template for {op}: {ADVICE}")


BOOL_OPS = frozenset({"gt", "ge", "lt", "le", "eq", "ne", "and", "or", "not"})


def _full_reduction_input(lower: Lowering, call: OpCall) -> int:
    x = call.at(0)
    if call.get("dtype") is not None and call.get("dtype") not in FLOAT_DTYPES:
        raise uncovered(f"{call.packet} to a non-float dtype")
    return lower.node(x)


def _add(lower: Lowering, call: OpCall, sign: float) -> int:
    a, b, alpha = call.at(0), call.at(1), call.get("alpha")
    scale = sign * (1.0 if alpha is None else float(alpha))
    if call.packet == "aten.rsub":
        a, b = b, a
    if scale == 1.0:
        return lower.elementwise("add", call, a, b)
    if scale == -1.0:
        return lower.elementwise("sub", call, a, b)
    return lower.elementwise("add", call, a, Id(lower.elementwise("mul", call, b, scale)))


def _div(lower: Lowering, call: OpCall) -> int:
    quotient = lower.elementwise("div", call, call.at(0), call.at(1))
    mode = call.get("rounding_mode")
    if mode == "floor":
        return lower.graph.op("floor", quotient)
    return lower.graph.op("trunc", quotient) if mode == "trunc" else quotient


def _pow(lower: Lowering, call: OpCall) -> int:
    base, exponent = call.at(0), call.get("exponent")
    if not isinstance(base, Ref):  # aten.pow.Scalar: a number to a tensor power
        scaled = lower.elementwise("mul", call, exponent, math.log2(float(base)))
        return lower.graph.op("exp2", scaled)
    if isinstance(exponent, Ref):
        raise uncovered("aten.pow with a tensor exponent")
    x, e = lower.node(base), float(exponent)
    g = lower.graph
    special = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}
    if e in special:
        return g.op(special[e], x)
    if e.is_integer() and abs(e) <= 8:
        result, square, n = g.const(1.0), x, int(abs(e))
        first = True
        while n:  # exponentiation by squaring, so x ** 4 is two multiplies
            if n & 1:
                result = square if first else g.op("mul", result, square)
                first = False
            n >>= 1
            if n:
                square = g.op("mul", square, square)
        return g.op("reciprocal", result) if e < 0 else result
    return g.op("powf", x, g.const(e))


def _clamp(lower: Lowering, call: OpCall, low: Arg, high: Arg) -> int:
    x = lower.node(call.at(0))
    if isinstance(low, Ref) or isinstance(high, Ref):
        raise uncovered(f"{call.packet} with tensor bounds")
    if low is not None:
        x = lower.graph.op("max2", x, lower.graph.const(float(low)))
    if high is not None:
        x = lower.graph.op("min2", x, lower.graph.const(float(high)))
    return x


def _cast(lower: Lowering, call: OpCall) -> int:
    dtype = call.get("dtype")
    x = lower.node(call.at(0))
    if dtype is None:
        return x
    if dtype not in FLOAT_DTYPES:
        raise uncovered(f"aten._to_copy to {dtype}")
    name = FLOAT_DTYPES[dtype]
    if lower.graph.nodes[x].dtype == "bool":
        return lower.graph.op("to_fp", x)
    return x if name in ("float32", "float64") else lower.graph.op("round", x, attr=name)


def _gelu(lower: Lowering, call: OpCall) -> int:
    return lower.elementwise("gelu_tanh" if call.get("approximate") == "tanh" else "gelu", call, call.at(0))


def _reduction(name: str) -> Callable[[Lowering, OpCall], int | tuple[int, ...]]:
    def handle(lower: Lowering, call: OpCall) -> int | tuple[int, ...]:
        x = _full_reduction_input(lower, call)
        if name == "mean":
            return lower.mean(x)
        if name in ("max.dim", "min.dim"):
            kind = name.split(".", maxsplit=1)[0]
            return lower.reduce(kind, x), lower.reduce(f"arg{kind}", x)
        return lower.reduce(name, x)

    return handle


def _max_min(name: str) -> Callable[[Lowering, OpCall], int | tuple[int, ...]]:
    def handle(lower: Lowering, call: OpCall) -> int | tuple[int, ...]:
        if call.op.endswith(".dim"):
            return _reduction(f"{name}.dim")(lower, call)
        if call.op.endswith(".default") and len([a for a in call.args if isinstance(a[1], Ref)]) == 1:
            return lower.reduce(name, lower.node(call.at(0)))
        return lower.elementwise(f"{name}2", call, call.at(0), call.at(1))

    return handle


def _variance(root: bool) -> Callable[[Lowering, OpCall], int | tuple[int, ...]]:
    def handle(lower: Lowering, call: OpCall) -> int | tuple[int, ...]:
        correction = call.get("correction")
        if correction is None:
            correction = 1 if call.get("unbiased") in (None, True) else 0
        _, var = lower.centred_variance(lower.node(call.at(0)), float(correction))
        return lower.graph.op("sqrt", var) if root else var

    return handle


def _vector_norm(lower: Lowering, call: OpCall) -> int:
    x = lower.node(call.at(0))
    order = call.get("ord") if call.packet == "aten.linalg_vector_norm" else call.get("p")
    order = 2.0 if order is None else float(order)
    g = lower.graph
    magnitude = g.op("abs", x)
    if order == math.inf:
        return lower.reduce("max", magnitude)
    if order == -math.inf:
        return lower.reduce("min", magnitude)
    if order == 1.0:
        return lower.reduce("sum", magnitude)
    if order == 2.0:
        return g.op("sqrt", lower.reduce("sum", g.op("mul", x, x)))
    if order == 0.0:
        return lower.reduce("sum", g.op("to_fp", g.op("ne", x, g.const(0.0))))
    powered = g.op("powf", magnitude, g.const(order))
    return g.op("powf", lower.reduce("sum", powered), g.const(1.0 / order))


def _softmax(log: bool) -> Callable[[Lowering, OpCall], int | tuple[int, ...]]:
    def handle(lower: Lowering, call: OpCall) -> int | tuple[int, ...]:
        x = lower.node(call.at(0))
        row_max, exps, total = lower.softmax(x)
        g = lower.graph
        g.labels.add("log_softmax" if log else "softmax")
        if log:
            return g.op("sub", g.op("sub", x, row_max), g.op("log", total))
        probs = g.op("div", exps, total)
        if call.packet == "aten._safe_softmax":  # a row that is all -inf gives zeros, not NaN
            return g.op("where", g.op("eq", row_max, g.const(-math.inf)), g.const(0.0), probs)
        return probs

    return handle


def _logsumexp(lower: Lowering, call: OpCall) -> int:
    row_max, _, total = lower.softmax(lower.node(call.at(0)))
    return lower.graph.op("add", row_max, lower.graph.op("log", total))


def _layer_norm(lower: Lowering, call: OpCall) -> tuple[int, ...]:
    g = lower.graph
    g.labels.add("layernorm")
    x = lower.node(call.at(0))
    mean, var = lower.centred_variance(x, 0.0)
    rstd = g.op("rsqrt", g.op("add", var, g.const(float(call.get("eps") or 1e-5))))
    y = g.op("mul", g.op("sub", x, mean), rstd)
    weight, bias = call.get("weight"), call.get("bias")
    if weight is not None:
        y = lower.elementwise("mul", call, Id(y), weight)
    if bias is not None:
        y = lower.elementwise("add", call, Id(y), bias)
    return y, mean, rstd


def _rms_norm(lower: Lowering, call: OpCall) -> int | tuple[int, ...]:
    g = lower.graph
    g.labels.add("rmsnorm")
    x = lower.node(call.at(0))
    eps = call.get("eps")
    if eps is None:
        meta = lower.trace.meta(call.at(0)) if isinstance(call.at(0), Ref) else None
        eps = torch.finfo(meta.dtype if meta is not None else torch.float32).eps
    rrms = g.op("rsqrt", g.op("add", lower.mean(g.op("mul", x, x)), g.const(float(eps))))
    y = g.op("mul", x, rrms)
    if call.get("weight") is not None:
        y = lower.elementwise("mul", call, Id(y), call.get("weight"))
    return (y, rrms) if call.packet == "aten._fused_rms_norm" else y


HANDLERS: dict[str, Callable[[Lowering, OpCall], int | tuple[int, ...]]] = {
    "aten.add": lambda lw, c: _add(lw, c, 1.0),
    "aten.sub": lambda lw, c: _add(lw, c, -1.0),
    "aten.rsub": lambda lw, c: _add(lw, c, -1.0),
    "aten.div": _div,
    "aten.true_divide": _div,
    "aten.pow": _pow,
    "aten.square": lambda lw, c: lw.elementwise("mul", c, c.at(0), c.at(0)),
    "aten.log10": lambda lw, c: lw.graph.op("mul", lw.elementwise("log", c, c.at(0)), lw.graph.const(1 / math.log(10))),
    "aten.tan": lambda lw, c: lw.graph.op(
        "div", lw.elementwise("sin", c, c.at(0)), lw.graph.op("cos", lw.node(c.at(0)))
    ),
    "aten.clamp": lambda lw, c: _clamp(lw, c, c.get("min"), c.get("max")),
    "aten.clamp_min": lambda lw, c: _clamp(lw, c, c.get("min"), None),
    "aten.clamp_max": lambda lw, c: _clamp(lw, c, None, c.get("max")),
    "aten.hardtanh": lambda lw, c: _clamp(lw, c, c.get("min_val"), c.get("max_val")),
    "aten.gelu": _gelu,
    "aten.leaky_relu": lambda lw, c: lw.elementwise("leaky_relu", c, c.at(0), c.get("negative_slope")),
    "aten.elu": lambda lw, c: lw.elementwise("elu", c, c.at(0), c.get("alpha"), c.get("scale"), c.get("input_scale")),
    "aten.selu": lambda lw, c: lw.elementwise("elu", c, c.at(0), 1.6732632423543772, 1.0507009873554805, 1.0),
    "aten.softplus": lambda lw, c: lw.elementwise("softplus", c, c.at(0), c.get("beta"), c.get("threshold")),
    "aten.threshold": lambda lw, c: lw.elementwise(
        "where",
        c,
        Id(lw.graph.op("le", lw.node(c.at(0)), lw.node(c.get("threshold")), dtype="bool")),
        c.get("value"),
        c.at(0),
    ),
    "aten.where": lambda lw, c: lw.elementwise("where", c, c.at(0), c.at(1), c.at(2)),
    "aten.masked_fill": lambda lw, c: lw.elementwise("where", c, c.get("mask"), c.get("value"), c.at(0)),
    "aten.lerp": lambda lw, c: lw.elementwise(
        "add",
        c,
        c.at(0),
        Id(lw.graph.op("mul", lw.node(c.get("weight")), lw.graph.op("sub", lw.node(c.at(1)), lw.node(c.at(0))))),
    ),
    "aten.addcmul": lambda lw, c: lw.elementwise(
        "add", c, c.at(0), Id(lw.graph.op("mul", lw.elementwise("mul", c, c.at(1), c.at(2)), lw.node(c.get("value"))))
    ),
    "aten.addcdiv": lambda lw, c: lw.elementwise(
        "add", c, c.at(0), Id(lw.graph.op("mul", lw.elementwise("div", c, c.at(1), c.at(2)), lw.node(c.get("value"))))
    ),
    "aten._to_copy": _cast,
    "aten.sum": _reduction("sum"),
    "aten.mean": _reduction("mean"),
    "aten.amax": _reduction("max"),
    "aten.amin": _reduction("min"),
    "aten.argmax": _reduction("argmax"),
    "aten.argmin": _reduction("argmin"),
    "aten.max": _max_min("max"),
    "aten.min": _max_min("min"),
    "aten.var": _variance(root=False),
    "aten.std": _variance(root=True),
    "aten.linalg_vector_norm": _vector_norm,
    "aten.norm": _vector_norm,
    "aten.logsumexp": _logsumexp,
    "aten._softmax": _softmax(log=False),
    "aten._safe_softmax": _softmax(log=False),
    "aten._log_softmax": _softmax(log=True),
    "aten.native_layer_norm": _layer_norm,
    "aten.rms_norm": _rms_norm,
    "aten._fused_rms_norm": _rms_norm,
}
