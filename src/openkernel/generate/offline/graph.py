"""The kernel's dataflow graph: what a template computes, value by value, before any code is written.

A ``Graph`` is built by lowering the traced ATen ops (``lower.py``): loads of the sources, constants,
pointwise ops, cast-and-round steps and reductions along the row. Every value has a *kind* that says
how it varies over the ``[rows, cols]`` frame the kernel walks:

- ``full``: one value per element (the input rows, the output);
- ``feat``: one per column, the same for every row (a weight or bias over the features);
- ``row``: one per row (a reduction's result, or a ``[..., 1]`` input);
- ``scal``: one for the whole call (a constant, a one-element tensor).

Equal nodes are built once (common subexpressions are shared), so ``exp(x - max)`` used twice is
computed once, and the patterns below can compare nodes by id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["KIND_ORDER", "REDUCTIONS", "Graph", "Node", "join_kinds"]

REDUCTIONS = frozenset({"sum", "max", "min", "argmax", "argmin"})  # along the row (the frame's columns)
KIND_ORDER = {"scal": 0, "feat": 1, "row": 1, "full": 2}


def join_kinds(kinds: list[str]) -> str:
    """The kind of an elementwise result: a per-column and a per-row operand broadcast to full."""
    distinct = set(kinds)
    if "full" in distinct or {"feat", "row"} <= distinct:
        return "full"
    if "feat" in distinct:
        return "feat"
    if "row" in distinct:
        return "row"
    return "scal"


@dataclass(frozen=True)
class Node:
    op: str  # "load", "const", "ncols", "acc", a pointwise op ("add", "exp", ...), "round", or a reduction
    args: tuple[int, ...]  # node ids
    kind: str  # "full", "feat", "row" or "scal"
    attr: float | int | str | None = None  # const value; load: source index; round: dtype name; reductions: none
    dtype: str = "fp"  # "fp", "bool" or "int" (argmax results)


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    _index: dict[Node, int] = field(default_factory=dict)
    labels: set[str] = field(default_factory=set)  # what composite ops were lowered: "softmax", "layernorm"...

    def add(self, node: Node) -> int:
        found = self._index.get(node)
        if found is not None:
            return found
        self.nodes.append(node)
        self._index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: float | int | bool) -> int:
        return self.add(Node("const", (), "scal", float(value)))

    def op(self, name: str, *args: int, attr: float | int | str | None = None, dtype: str = "fp") -> int:
        """A pointwise op on ``args``; its kind is the broadcast of theirs."""
        kind = join_kinds([self.nodes[a].kind for a in args])
        return self.add(Node(name, args, kind, attr, dtype))

    def reduce(self, name: str, arg: int) -> int:
        """A reduction of ``arg`` along the row: one value per row."""
        return self.add(Node(name, (arg,), "row", None, "int" if name.startswith("arg") else "fp"))

    def live(self, output: int) -> list[int]:
        """The ids ``output`` depends on (itself included), in increasing (topological) order."""
        seen: set[int] = set()
        stack = [output]
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(self.nodes[i].args)
        return sorted(seen)

    def online_pairs(self, ids: list[int]) -> dict[int, int]:
        """Sum id -> max id for each ``sum(exp(v - max(v)))``: the pair online softmax computes in one pass."""
        pairs: dict[int, int] = {}
        for i in ids:
            node = self.nodes[i]
            if node.op != "sum":
                continue
            exp = self.nodes[node.args[0]]
            if exp.op != "exp":
                continue
            diff = self.nodes[exp.args[0]]
            if diff.op != "sub":
                continue
            v, m = diff.args
            if self.nodes[m].op == "max" and self.nodes[m].args == (v,):
                pairs[i] = m
        return pairs

    def welford_pairs(self, ids: list[int]) -> dict[int, int]:
        """Sum-of-squares id -> sum id for each ``sum((v - sum(v)/n) ** 2)``: the pair Welford computes in one pass."""
        pairs: dict[int, int] = {}
        for i in ids:
            node = self.nodes[i]
            if node.op != "sum":
                continue
            square = self.nodes[node.args[0]]
            if square.op != "mul" or square.args[0] != square.args[1]:
                continue
            centred = self.nodes[square.args[0]]
            if centred.op != "sub":
                continue
            v, mean = centred.args
            mean_node = self.nodes[mean]
            if mean_node.op != "div" or self.nodes[mean_node.args[1]].op != "ncols":
                continue
            total = mean_node.args[0]
            if self.nodes[total].op == "sum" and self.nodes[total].args == (v,):
                pairs[i] = total
        return pairs
