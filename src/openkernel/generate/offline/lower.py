"""Lowering: from traced ATen ops to the kernel's dataflow graph, one op at a time, over one frame.

The frame is the ``[rows, cols]`` view a kernel walks (a shape whose last ``k`` dimensions form the
row); each traced value becomes a graph node whose kind says how it varies over that frame. Views
only change how a value is seen; what cannot be lowered raises :class:`Uncovered` naming the op.
The op-by-op rewrites live in ``aten_ops.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from openkernel.generate.offline.aten_ops import (
    BINARY,
    BOOL_OPS,
    FLOAT_DTYPES,
    HANDLERS,
    UNARY,
    VIEW_OPS,
    Id,
    uncovered,
)
from openkernel.generate.offline.graph import Graph, Node
from openkernel.generate.offline.trace import ADVICE, OpCall, Ref, Trace, Uncovered

__all__ = ["Frame", "Lowering", "reduced_dims"]


@dataclass(frozen=True)
class Frame:
    """The ``[rows, cols]`` view the kernel walks: ``shape`` with its last ``k`` dimensions as the row."""

    shape: tuple[int, ...]
    k: int
    start: int | None = None  # the first reduced dimension when they are not the last ones (a strided frame)

    @property
    def strided(self) -> bool:
        return self.start is not None and self.start + self.k < len(self.shape)

    @property
    def lead(self) -> tuple[int, ...]:
        """The dimensions before the reduced ones."""
        return self.shape[: self._first]

    @property
    def trail(self) -> tuple[int, ...]:
        """The reduced dimensions (the row)."""
        return self.shape[self._first : self._first + self.k]

    @property
    def inner(self) -> tuple[int, ...]:
        """The dimensions after the reduced ones: empty unless the frame is strided."""
        return self.shape[self._first + self.k :]

    @property
    def _first(self) -> int:
        return len(self.shape) - self.k if self.start is None else self.start

    def classify(self, shape: tuple[int, ...]) -> str | None:
        """How a tensor of ``shape`` broadcasts against the frame: full, feat, row (keepdim form) or scal.

        Leading dimensions only group rows, so ``[B, S, D]`` is full for a ``[B * S, D]`` frame (and
        ``[B, S, 1]`` per-row): the kernel indexes row * n_cols + col either way.
        """
        if math.prod(shape) == 1:
            return "scal"
        if self.strided:  # a middle dimension reduced: whole (contiguous, maybe reshaped) tensors and scalars only
            return "full" if math.prod(shape) == math.prod(self.shape) else None
        k = self.k
        trail, lead = tuple(shape[len(shape) - k :]) if len(shape) >= k else None, tuple(shape[: len(shape) - k])
        if trail == self.trail and math.prod(lead) == math.prod(self.lead) and len(shape) >= k:
            return "full"
        padded = (1,) * max(0, len(self.shape) - len(shape)) + tuple(shape)
        lead_ones = len(padded) == len(self.shape) and all(d == 1 for d in padded[: len(self.lead)])
        if lead_ones and padded[len(self.lead) :] == self.trail:
            return "feat"
        if trail is not None and all(d == 1 for d in trail) and math.prod(lead) == math.prod(self.lead) and lead:
            return "row"
        return None

    def is_row_shape(self, shape: tuple[int, ...]) -> bool:
        """A per-row value, reduced dimensions kept (``[..., 1]``) or dropped."""
        kept = self.lead + (1,) * self.k + self.inner
        return shape in (self.lead + self.inner, kept) or math.prod(shape) == math.prod(self.lead + self.inner) == 1


def reduced_dims(call: OpCall, rank: int) -> tuple[int, ...]:
    """The dimensions ``call`` reduces (normalised, sorted); all of them when it names none."""
    packet = call.packet
    if packet in ("aten._softmax", "aten._log_softmax", "aten._safe_softmax"):
        dims: object = call.get("dim")
    elif packet in ("aten.native_layer_norm", "aten.rms_norm", "aten._fused_rms_norm"):
        shape = call.get("normalized_shape")
        dims = tuple(range(rank - len(shape), rank)) if isinstance(shape, tuple) else None
    else:
        dims = call.get("dim")
    if dims is None or dims == ():
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = (dims,)
    assert isinstance(dims, tuple)
    return tuple(sorted({int(d) % max(rank, 1) for d in dims}))


class Lowering:
    """Maps trace values to graph nodes, op by op, over one frame."""

    def __init__(self, trace: Trace, frame: Frame, graph: Graph) -> None:
        self.trace: Trace = trace
        self.frame: Frame = frame
        self.graph: Graph = graph
        self.values: dict[int, int] = {}  # trace value -> node id
        self.tuples: dict[int, tuple[int, ...]] = {}  # trace value of a tuple-returning op -> its parts
        self.loaded: dict[int, int] = {}  # source index -> load node id
        # Round each op's result to its own 16-bit dtype, as torch stores it: needed when the output is
        # wider (fp32) than an intermediate (fp16), so the fp32 tolerance sees torch's roundings too.
        self.exact_intermediates = False

    # -- operands --------------------------------------------------------------------------------------

    def shape(self, ref: Ref) -> tuple[int, ...]:
        meta = self.trace.meta(ref)
        return meta.shape if meta is not None else ()

    def node(self, arg: object) -> int:
        """The node for an operand: a graph node, a traced value, or a Python number as a constant."""
        if isinstance(arg, Id):
            return arg.node
        if isinstance(arg, Ref):
            if arg.index in self.values:
                return self.values[arg.index]
            if arg.index < len(self.trace.sources):
                return self._load(arg.index)
            raise uncovered("an op's tuple result used whole")
        if isinstance(arg, bool | int | float):
            return self.graph.const(arg)
        raise Uncovered(f"no offline template for an operand of type {type(arg).__name__}: {ADVICE}")

    def _load(self, index: int) -> int:
        source = self.trace.sources[index]
        if source.meta.dtype not in FLOAT_DTYPES:
            raise Uncovered(f"no offline template for a {source.meta.dtype} input ({source.name}): {ADVICE}")
        kind = self.frame.classify(source.meta.shape)
        if kind is None:
            raise Uncovered(
                f"no offline template for how {source.name} {list(source.meta.shape)} broadcasts against "
                f"{list(self.frame.shape)}: {ADVICE}"
            )
        node = self.graph.add(Node("load", (), kind, index))
        self.loaded[index] = node
        return node

    def elementwise(self, name: str, call: OpCall, *args: object, attr: float | str | None = None) -> int:
        """A pointwise node, after checking that a per-row operand is in its keepdim form."""
        ids = [self.node(a) for a in args]
        node = self.graph.op(name, *ids, attr=attr, dtype="bool" if name in BOOL_OPS else "fp")
        if self.graph.nodes[node].kind in ("full", "feat"):
            for a, i in zip(args, ids, strict=True):
                shape_kind = self.frame.classify(self.shape(a)) if isinstance(a, Ref) else "scal"
                if self.graph.nodes[i].kind == "row" and shape_kind not in ("row", "full", "scal"):
                    raise uncovered(f"{call.packet} broadcasting a reduced value without keepdim")
        return node

    # -- ops -------------------------------------------------------------------------------------------

    def lower(self, index: int, call: OpCall) -> None:
        """Lower one traced op; with ``exact_intermediates``, round its result as torch stores it."""
        self._lower(index, call)
        meta, value = call.meta, self.values.get(index)
        if self.exact_intermediates and meta is not None and value is not None and call.packet not in VIEW_OPS:
            self.values[index] = self.rounded(value, meta.dtype)

    def rounded(self, node: int, dtype: torch.dtype) -> int:
        """``node`` rounded to a 16-bit ``dtype`` (and back to the compute dtype); others unchanged."""
        name = FLOAT_DTYPES.get(dtype)
        current = self.graph.nodes[node]
        if name not in ("float16", "bfloat16") or current.dtype != "fp" or current.op in ("load", "const"):
            return node
        if current.op == "round" and current.attr == name:
            return node
        return self.graph.add(Node("round", (node,), current.kind, name))

    def _lower(self, index: int, call: OpCall) -> None:
        packet = call.packet
        if packet.endswith("_") and not packet.endswith("__") and packet not in HANDLERS:
            target = call.at(0)
            if isinstance(target, Ref) and target.index < len(self.trace.sources):
                raise Uncovered(f"no offline template for {packet}: the reference modifies an input in place")
            packet = packet[:-1]
        if packet == "getitem":
            parts = self.tuples.get(call.at(0).index if isinstance(call.at(0), Ref) else -1)
            position = call.at(1)
            if parts is None or not isinstance(position, int) or position >= len(parts) or parts[position] < 0:
                raise uncovered("this element of a tuple result")
            self.values[index] = parts[position]
            return
        if packet in VIEW_OPS:
            self.values[index] = self._view(call)
            return
        if packet in UNARY:
            self.values[index] = self.elementwise(UNARY[packet], call, call.at(0))
            return
        if packet in BINARY:
            self.values[index] = self.elementwise(BINARY[packet], call, call.at(0), call.at(1))
            return
        handler = HANDLERS.get(packet)
        if handler is None:
            raise uncovered(packet)
        result = handler(self, call)
        if isinstance(result, tuple):
            self.tuples[index] = result
        else:
            self.values[index] = result

    def _view(self, call: OpCall) -> int:
        source = call.at(0)
        node = self.node(source)
        kind = self.graph.nodes[node].kind
        meta = call.meta
        if kind == "scal" or meta is None or not isinstance(source, Ref):
            return node
        before, after = self.shape(source), meta.shape
        if after == before or (call.packet == "aten.expand" and self.frame.classify(after) in ("full", kind)):
            return node
        if call.packet in ("aten.t", "aten.transpose", "aten.permute"):  # reorders elements: not a regrouping
            raise uncovered(f"{call.packet} from {list(before)} to {list(after)} inside a fused kernel")
        if kind == "row" and self.frame.is_row_shape(before) and self.frame.is_row_shape(after):
            return node
        if self.frame.classify(after) == kind and self.frame.classify(before) == kind:
            return node  # leading dimensions regrouped: the same rows
        raise uncovered(f"{call.packet} from {list(before)} to {list(after)} inside a fused kernel")

    def reduce(self, name: str, arg: int) -> int:
        if self.graph.nodes[arg].kind != "full":
            raise uncovered(f"a {name} reduction of a value that is not a full row")
        return self.graph.reduce(name, arg)

    def mean(self, arg: int) -> int:
        return self.graph.op("div", self.reduce("sum", arg), self.ncols())

    def ncols(self) -> int:
        return self.graph.add(Node("ncols", (), "scal"))

    def softmax(self, x: int) -> tuple[int, int, int]:
        """(row max, exp(x - max), sum of the exps): the shared start of softmax and log-softmax."""
        row_max = self.reduce("max", x)
        exps = self.graph.op("exp", self.graph.op("sub", x, row_max))
        return row_max, exps, self.reduce("sum", exps)

    def centred_variance(self, x: int, correction: float) -> tuple[int, int]:
        """(mean, variance with ``correction``): the mean first, then the centred sum of squares."""
        mean = self.mean(x)
        centred = self.graph.op("sub", x, mean)
        squares = self.reduce("sum", self.graph.op("mul", centred, centred))
        denominator = (
            self.ncols() if correction == 0 else self.graph.op("sub", self.ncols(), self.graph.const(correction))
        )
        return mean, self.graph.op("div", squares, denominator)
