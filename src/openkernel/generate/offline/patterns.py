"""Recognition: which offline template covers a traced reference, with what fused around it.

Two plans cover the problems the offline generator handles:

- :class:`RowPlan`: chains of pointwise ops and reductions along the last dimension(s) in one pass
  over ``[rows, cols]``: pointwise chains (unary, binary, scalars, broadcast rows and columns),
  reductions (sum, mean, max, min, argmax, norms, var), softmax and log-softmax, layernorm and
  rmsnorm, and any of them with the pointwise ops around them fused in.
- :class:`MatmulPlan`: one ``mm`` / ``addmm`` / ``bmm`` / ``baddbmm`` (operands read through their
  strides, a transposed weight included) with a fused pointwise epilogue (bias, activation, scale,
  residual).

Anything else raises :class:`Uncovered` with the op that stops it ("no offline template for
aten.convolution: ...").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from openkernel.generate.offline.aten_ops import FLOAT_DTYPES, REDUCING_OPS, VIEW_OPS, covered, uncovered
from openkernel.generate.offline.graph import REDUCTIONS, Graph, Node
from openkernel.generate.offline.lower import Frame, Lowering, reduced_dims
from openkernel.generate.offline.trace import ADVICE, OpCall, Ref, Source, Trace, Uncovered

__all__ = ["MATMUL_OPS", "MatmulPlan", "Operand", "Plan", "RowPlan", "recognise"]

MATMUL_OPS = frozenset({"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm"})
_SOFTMAX_OPS = frozenset({"aten._softmax", "aten._safe_softmax", "aten._log_softmax"})


@dataclass(frozen=True)
class RowPlan:
    """Pointwise ops and reductions along the row, over a ``[rows, cols]`` frame."""

    template: str  # "pointwise", "reduction", "softmax", "log_softmax", "layernorm", "rmsnorm" or "row_fused"
    nodes: tuple[Node, ...]
    output: int  # the node stored
    sources: tuple[Source, ...]  # the trace's sources; a load node's attr indexes them
    frame: Frame  # at the traced (full) size
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    compute: str  # "float32" (fp16/bf16/fp32 problems) or "float64"

    @property
    def n_cols(self) -> int:
        return math.prod(self.frame.trail)

    @property
    def n_rows(self) -> int:
        """Rows of the frame: one per output value of a reduction (outer x inner when strided)."""
        return math.prod(self.frame.lead) * math.prod(self.frame.inner)

    @property
    def reductions(self) -> tuple[int, ...]:
        return tuple(i for i in self.live() if self.nodes[i].op in REDUCTIONS)

    def live(self) -> list[int]:
        graph = Graph(list(self.nodes))
        return graph.live(self.output)


@dataclass(frozen=True)
class Operand:
    """A matmul operand: a source read directly, possibly with its last two dimensions swapped."""

    source: int  # index into the trace's sources
    transposed: bool  # the matmul reads the source's last two dimensions swapped (x @ W^T reads W [N, K])
    rank: int  # the source's rank


@dataclass(frozen=True)
class MatmulPlan:
    """``C = A @ B`` (batched or not) with a pointwise epilogue over the product."""

    template: str  # "matmul"
    op: str  # "aten.mm", "aten.addmm", "aten.bmm" or "aten.baddbmm"
    a: Operand
    b: Operand
    batch: int  # 1 for mm/addmm
    m: int
    n: int
    k: int
    nodes: tuple[Node, ...]  # the epilogue; the node with op "acc" is the product
    output: int
    sources: tuple[Source, ...]
    frame: Frame  # the output's shape, as rows of n
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    in_dtype: torch.dtype

    @property
    def epilogue_ops(self) -> tuple[str, ...]:
        graph = Graph(list(self.nodes))
        return tuple(
            self.nodes[i].op for i in graph.live(self.output) if self.nodes[i].op not in ("acc", "load", "const")
        )


Plan = RowPlan | MatmulPlan


def _live(trace: Trace) -> list[int]:
    seen: set[int] = set()
    stack = [trace.output.index]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        call = trace.call(Ref(i))
        if call is not None:
            stack.extend(_refs(call))
    return sorted(seen)


def _refs(call: OpCall) -> list[int]:
    out: list[int] = []
    for _, value in call.args:
        items = value if isinstance(value, tuple) else (value,)
        out.extend(v.index for v in items if isinstance(v, Ref))
    return out


def recognise(trace: Trace) -> Plan:
    """The plan for ``trace``, or :class:`Uncovered` naming what no template covers."""
    if trace.output.index < len(trace.sources):
        raise Uncovered(
            "no offline template for a forward that returns an input unchanged: there is nothing to compute"
        )
    live = _live(trace)
    calls = [(i, c) for i in live if (c := trace.call(Ref(i))) is not None]
    matmuls = [i for i, c in calls if c.packet in MATMUL_OPS]
    _check_attention(trace, calls, matmuls)
    for _, call in calls:
        if not covered(call.packet) and call.packet not in MATMUL_OPS:
            raise uncovered(call.packet)
    if len(matmuls) > 1:
        names = ", ".join(trace.calls[i - len(trace.sources)].packet for i in matmuls)
        raise Uncovered(f"no offline template for {len(matmuls)} matmuls in one forward ({names}): {ADVICE}")
    if matmuls:
        return _matmul_plan(trace, calls, matmuls[0])
    return _row_plan(trace, calls)


def _check_attention(trace: Trace, calls: list[tuple[int, OpCall]], matmuls: list[int]) -> None:
    """A softmax between two matmuls is attention: say so rather than name one of its pieces."""
    if len(matmuls) < 2:
        return
    before = set(range(min(matmuls), max(matmuls)))
    for i, call in calls:
        if call.packet in _SOFTMAX_OPS and i in before:
            first, second = (trace.calls[j - len(trace.sources)].packet for j in (min(matmuls), max(matmuls)))
            raise Uncovered(
                f"no offline template for attention ({first} -> {call.packet} -> {second}, as "
                f"scaled_dot_product_attention traces): {ADVICE}"
            )


def _row_plan(trace: Trace, calls: list[tuple[int, OpCall]]) -> RowPlan:
    frame = _frame(trace, calls)
    graph = Graph()
    lowering = Lowering(trace, frame, graph)
    lowering.exact_intermediates = _narrow_inside(trace, calls)
    for i, call in calls:
        lowering.lower(i, call)
    output = lowering.values.get(trace.output.index)
    out_meta = trace.meta(trace.output)
    if output is None or out_meta is None:
        raise uncovered("a forward whose result is a tuple element")
    kind = graph.nodes[output].kind
    if kind == "full":
        shape_ok = frame.classify(out_meta.shape) == "full"  # the frame's shape, or its rows regrouped
    else:
        shape_ok = kind == "row" and frame.is_row_shape(out_meta.shape)
    if not shape_ok:
        raise Uncovered(
            f"no offline template for an output of shape {list(out_meta.shape)} over the rows of "
            f"{list(frame.shape)}: {ADVICE}"
        )
    if out_meta.dtype not in FLOAT_DTYPES and not (
        out_meta.dtype == torch.int64 and graph.nodes[output].dtype == "int"
    ):
        raise uncovered(f"a {out_meta.dtype} output")
    output = _drop_final_round(graph, output, out_meta.dtype)
    if frame.strided:
        _check_strided(graph, output, frame)
    dtypes = {s.meta.dtype for s in trace.sources} | {out_meta.dtype}
    compute = "float64" if torch.float64 in dtypes else "float32"
    plan = RowPlan("", tuple(graph.nodes), output, trace.sources, frame, out_meta.shape, out_meta.dtype, compute)
    return dataclasses.replace(plan, template=_label(plan, graph.labels))


def _check_strided(graph: Graph, output: int, frame: Frame) -> None:
    """A reduction over a middle dimension runs one pass: no reduction may feed another."""
    dims = list(range(frame.start or 0, (frame.start or 0) + frame.k))
    for i in graph.live(output):
        node = graph.nodes[i]
        if node.op in REDUCTIONS and any(graph.nodes[j].op in REDUCTIONS for j in graph.live(node.args[0])):
            raise Uncovered(
                f"no offline template for chained reductions over dimension(s) {dims} "
                f"of {list(frame.shape)} (softmax and norms reduce the last dimension): {ADVICE}"
            )


def _narrow_inside(trace: Trace, calls: list[tuple[int, OpCall]]) -> bool:
    """Whether a 16-bit intermediate feeds a wider output (its roundings then show in the result)."""
    out = trace.meta(trace.output)
    narrow = {torch.float16, torch.bfloat16}
    if out is None or out.dtype in narrow:
        return False
    return any(c.meta is not None and c.meta.dtype in narrow for _, c in calls)


def _drop_final_round(graph: Graph, output: int, dtype: torch.dtype) -> int:
    """A last cast to the output's own dtype is the store's rounding: do it once, at the store."""
    node = graph.nodes[output]
    if node.op == "round" and node.attr == FLOAT_DTYPES.get(dtype):
        return node.args[0]
    return output


def _frame(trace: Trace, calls: list[tuple[int, OpCall]]) -> Frame:
    """The frame every reduction shares (its input's shape, the reduced trailing dims), else the output's."""
    found: list[tuple[tuple[int, ...], tuple[int, ...], str]] = []
    for _, call in calls:
        if call.packet.rstrip("_") not in REDUCING_OPS or not _is_reduction(call):
            continue
        x = call.at(0)
        meta = trace.meta(x) if isinstance(x, Ref) else None
        if meta is None:
            raise uncovered(call.packet)
        found.append((meta.shape, reduced_dims(call, len(meta.shape)), call.packet))
    if not found:
        out = trace.meta(trace.output)
        if out is None or not out.shape:
            raise uncovered("a forward with a scalar result")
        return Frame(out.shape, 1)
    shape, dims, packet = found[0]
    for other_shape, other_dims, other in found[1:]:
        if (other_shape, other_dims) != (shape, dims):
            raise Uncovered(
                f"no offline template for reductions over different dimensions ({packet} over {list(dims)} of "
                f"{list(shape)}, {other} over {list(other_dims)} of {list(other_shape)}): {ADVICE}"
            )
    k = len(dims)
    if dims == tuple(range(len(shape) - k, len(shape))):
        return Frame(shape, k)
    if dims != tuple(range(dims[0], dims[0] + k)):
        raise Uncovered(
            f"no offline template for {packet} over dimensions {list(dims)} of {list(shape)}: the templates "
            f"reduce neighbouring dimensions; {ADVICE}"
        )
    return Frame(shape, k, dims[0])


def _is_reduction(call: OpCall) -> bool:
    """``aten.max`` / ``aten.min`` reduce unless they compare two tensors (``max.other``)."""
    if call.packet in ("aten.max", "aten.min"):
        return call.op.endswith(".dim") or sum(isinstance(v, Ref) for _, v in call.args) == 1
    return True


def _label(plan: RowPlan, labels: set[str]) -> str:
    """The template's name: the composite op lowered, or the pattern the graph shows."""
    reductions = plan.reductions
    if not reductions:
        return "pointwise"
    if len(labels) == 1:
        return next(iter(labels))
    if labels:
        return "row_fused"
    out = plan.nodes[plan.output]
    if out.kind == "row":
        return "reduction"
    graph = Graph(list(plan.nodes))
    live = plan.live()
    if len(reductions) == 2 and graph.online_pairs(live):
        return "log_softmax" if any(plan.nodes[i].op == "log" for i in live) else "softmax"
    if len(reductions) == 2 and graph.welford_pairs(live):
        return "layernorm"
    if len(reductions) == 1:
        total = plan.nodes[reductions[0]]
        square = plan.nodes[total.args[0]]
        if total.op == "sum" and square.op == "mul" and square.args[0] == square.args[1]:
            return "rmsnorm"
    return "row_fused"


def _operand(trace: Trace, ref: object, shape: tuple[int, ...], matmul: str) -> tuple[Operand, set[int]]:
    """Walk ``ref`` back through views to the source a matmul reads, and check the views keep its layout."""
    chain: set[int] = set()
    transposed = False
    while isinstance(ref, Ref) and ref.index >= len(trace.sources):
        call = trace.call(ref)
        assert call is not None
        if call.packet not in VIEW_OPS:
            raise Uncovered(f"no offline template fuses {call.packet} before {matmul} (a prologue): {ADVICE}")
        chain.add(ref.index)
        before = trace.meta(call.at(0)) if isinstance(call.at(0), Ref) else None
        rank = len(before.shape) if before is not None else 0
        if call.packet == "aten.t" and rank == 2:
            transposed = not transposed
        elif call.packet == "aten.transpose":
            pair = {int(call.get("dim0")) % rank, int(call.get("dim1")) % rank}
            if pair != {rank - 2, rank - 1}:
                raise uncovered(f"aten.transpose of dimensions {sorted(pair)} before {matmul}")
            transposed = not transposed
        elif call.packet == "aten.permute":
            dims = tuple(int(d) % rank for d in call.get("dims"))
            if dims[:-2] != tuple(range(rank - 2)):
                raise uncovered(f"aten.permute {list(dims)} before {matmul}")
            transposed ^= dims[-2:] == (rank - 1, rank - 2)
        ref = call.at(0)
    if not isinstance(ref, Ref):
        raise uncovered(f"a constant operand of {matmul}")
    source = trace.sources[ref.index].meta.shape
    rows, cols = shape[-2], shape[-1]
    expect = (cols, rows) if transposed else (rows, cols)
    batch = math.prod(shape[:-2])
    if len(shape) == 2 and not transposed:
        ok = source[-1] == cols and math.prod(source[:-1]) == rows
    else:
        ok = tuple(source[-2:]) == expect and math.prod(source[:-2]) in (batch, 1)
        ok = ok and (len(shape) == 3 or len(source) == 2)
    if not ok:
        raise uncovered(f"views of {trace.sources[ref.index].name} {list(source)} before {matmul}")
    return Operand(ref.index, transposed, len(source)), chain


def _shape(trace: Trace, ref: object) -> tuple[int, ...]:
    meta = trace.meta(ref) if isinstance(ref, Ref) else None
    return meta.shape if meta is not None else ()


def _matmul_plan(trace: Trace, calls: list[tuple[int, OpCall]], at: int) -> MatmulPlan:
    call = trace.call(Ref(at))
    assert call is not None
    names = {"aten.mm": (None, 0, 1), "aten.bmm": (None, 0, 1), "aten.addmm": (0, 1, 2), "aten.baddbmm": (0, 1, 2)}
    bias_at, a_at, b_at = names[call.packet]
    a_shape, b_shape = (_shape(trace, call.at(p)) for p in (a_at, b_at))
    out = trace.meta(trace.output)
    a, chain_a = _operand(trace, call.at(a_at), a_shape, call.packet)
    b, chain_b = _operand(trace, call.at(b_at), b_shape, call.packet)
    in_dtype = trace.sources[a.source].meta.dtype
    if in_dtype not in (torch.float16, torch.bfloat16, torch.float32) or trace.sources[b.source].meta.dtype != in_dtype:
        raise uncovered(f"{call.packet} on {in_dtype} x {trace.sources[b.source].meta.dtype}")
    if out is None:
        raise uncovered("a matmul whose result is a tuple")
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = a_shape[0] if len(a_shape) == 3 else 1
    frame = Frame(out.shape, 1)
    if out.shape[-1] != n or math.prod(out.shape) != batch * m * n:
        raise uncovered(f"a view of the {call.packet} result to {list(out.shape)}")
    graph = Graph()
    lowering = Lowering(trace, frame, graph)
    lowering.exact_intermediates = _narrow_inside(trace, calls)
    acc = graph.add(Node("acc", (), "full"))
    product = acc
    if bias_at is not None:
        alpha, beta = (1.0 if call.get(s) is None else float(call.get(s)) for s in ("alpha", "beta"))
        product = acc if alpha == 1.0 else graph.op("mul", acc, graph.const(alpha))
        bias = lowering.node(call.at(bias_at))
        bias = bias if beta == 1.0 else graph.op("mul", bias, graph.const(beta))
        product = graph.op("add", product, bias)
    lowering.values[at] = (
        lowering.rounded(product, call.meta.dtype) if lowering.exact_intermediates and call.meta else product
    )
    for i, other in calls:
        if i in chain_a or i in chain_b or i == at:
            continue
        if other.packet.rstrip("_") in REDUCING_OPS and _is_reduction(other):
            raise Uncovered(f"no offline template fuses {other.packet} with {call.packet}: {ADVICE}")
        lowering.lower(i, other)
    output = lowering.values.get(trace.output.index)
    if output is None or graph.nodes[output].kind != "full":
        raise uncovered(f"an output of {call.packet} that is not one value per product element")
    output = _drop_final_round(graph, output, out.dtype)
    return MatmulPlan(
        "matmul", call.packet, a, b, batch, m, n, k, tuple(graph.nodes), output, trace.sources, frame, out.shape,
        out.dtype, in_dtype,
    )  # fmt: skip
