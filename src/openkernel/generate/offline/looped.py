"""The looped row kernel's body: rows too long for registers, read in ``BLOCK``-wide chunks.

Reductions are grouped by level (a reduction whose input needs another reduction's result runs in a
later loop over the row). Two pairs fold into one loop, each with per-lane running state combined
across lanes at the end: online softmax (the row max and the sum of ``exp(x - max)``, rescaling
the running sum whenever the max grows) and Welford (the mean and the centred sum of squares of
layernorm and variance, without a second read of the row). Values that do not vary along the row
are computed once, between the loops; a last loop writes the output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from openkernel.generate.offline.exprs import Layout, Namer, emit_chain, var_name
from openkernel.generate.offline.graph import REDUCTIONS, Graph
from openkernel.generate.offline.patterns import RowPlan

__all__ = ["Lanes", "accumulator", "looped_body", "reduction_levels"]

_I = "    "


@dataclass(frozen=True)
class Lanes:
    """The per-lane accumulators' shape, the index each lane holds, the reduced length, the dtype."""

    shape: str  # "[BLOCK]", or "[BLOCK_R, BLOCK_I]" for a reduction over a non-last dimension
    index: str  # the reduced index of each lane ("cols", "red[:, None]")
    count: str  # the reduced length ("n_cols", "n_red")
    ftype: str  # "tl.float32"


def accumulator(op: str, v: str, loaded: bool, out: str, namer: Namer, lanes: Lanes) -> tuple[list[str], ...]:
    """(init, update, final) lines of a sum / max / min / argmax / argmin kept per lane, reduced along axis 0."""
    acc = namer.fresh(f"{out}_acc")
    shape, ftype = lanes.shape, lanes.ftype
    if op == "sum":
        update = f"{acc} += {v}" if loaded else f"{acc} += tl.where(mask, {v}, 0.0)"
        return [f"{acc} = tl.zeros({shape}, dtype={ftype})"], [update], [f"{out} = tl.sum({acc}, axis=0)"]
    if op in ("max", "min"):
        inf = '"-inf"' if op == "max" else '"inf"'
        fn = "tl.maximum" if op == "max" else "tl.minimum"
        return (
            [f"{acc} = tl.full({shape}, float({inf}), dtype={ftype})"],
            [f"{acc} = {fn}({acc}, tl.where(mask, {v}, float({inf})))"],
            [f"{out} = tl.{op}({acc}, axis=0)"],
        )
    # argmax / argmin: the best value per lane and where it was; the first index wins ties
    inf, cmp, pick = ('"-inf"', ">", "tl.max") if op == "argmax" else ('"inf"', "<", "tl.min")
    at, cand, better, top = (namer.fresh(n) for n in (f"{acc}_at", "candidate", "better", "best"))
    return (
        [f"{acc} = tl.full({shape}, float({inf}), dtype={ftype})", f"{at} = tl.zeros({shape}, dtype=tl.int32)"],
        [
            f"{cand} = tl.where(mask, {v}, float({inf}))",
            f"{better} = {cand} {cmp} {acc}",
            f"{at} = tl.where({better}, {lanes.index}, {at})",
            f"{acc} = tl.where({better}, {cand}, {acc})",
        ],
        [f"{top} = {pick}({acc}, axis=0)", f"{out} = tl.min(tl.where({acc} == {top}, {at}, {lanes.count}), axis=0)"],
    )


def reduction_levels(plan: RowPlan) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """(reduction -> loop level, online sum -> its max, Welford sum of squares -> its sum)."""
    graph = Graph(list(plan.nodes))
    live = plan.live()
    online, welford = graph.online_pairs(live), graph.welford_pairs(live)
    level: dict[int, int] = {}
    for r in (i for i in live if plan.nodes[i].op in REDUCTIONS):
        partner = online.get(r, welford.get(r))
        if partner is not None:
            level[r] = level[partner]
            continue
        level[r] = 1 + max((level[d] for d in _reductions_below(plan, plan.nodes[r].args[0])), default=0)
    return level, online, welford


def _reductions_below(plan: RowPlan, i: int) -> set[int]:
    node = plan.nodes[i]
    if node.op in REDUCTIONS:
        return {i}
    found: set[int] = set()
    for a in node.args:
        found |= _reductions_below(plan, a)
    return found


def _needed(plan: RowPlan, targets: list[int], have: dict[int, str]) -> list[int]:
    seen: set[int] = set()
    stack = list(targets)
    while stack:
        i = stack.pop()
        if i in seen or i in have:
            continue
        seen.add(i)
        stack.extend(plan.nodes[i].args)
    return sorted(seen)


def looped_body(
    plan: RowPlan, layout: Layout, names: dict[int, str], store: Callable[[RowPlan, str, str], str]
) -> list[str]:
    """Lines after ``row`` is set: the loops over the row, the per-row values between them, the store."""
    level, online, welford = reduction_levels(plan)
    live = plan.live()
    namer = Namer(set(names.values()))
    values: dict[int, str] = {}
    lines: list[str] = []
    ftype = f"tl.{layout.compute}"

    def hoist() -> None:
        """Per-row values whose inputs are ready: computed once, outside the loops."""
        for i in live:
            node = plan.nodes[i]
            ready = all(a in values for a in node.args)
            if i not in values and node.kind in ("row", "scal") and node.op not in REDUCTIONS and ready:
                lines.extend(emit_chain(plan.nodes, [i], layout, values, namer, names, plan.sources))

    # With cache hints, the loops before the output loop keep the row's chunks in L2 for the next loop
    # over the row; the output loop reads them for the last time.
    again = replace(layout, evict="last") if layout.evict else layout

    def chunk(targets: list[int], chunk_layout: Layout) -> tuple[list[str], dict[int, str]]:
        local = dict(values)
        body = ["cols = start + tl.arange(0, BLOCK)", "mask = cols < n_cols"]
        body += emit_chain(plan.nodes, _needed(plan, targets, local), chunk_layout, local, namer, names, plan.sources)
        return body, local

    for depth in range(1, max(level.values(), default=0) + 1):
        hoist()
        group = [r for r in sorted(level) if level[r] == depth and r not in online and r not in welford]
        init: list[str] = []
        update: list[str] = []
        final: list[str] = []
        last_read = depth == max(level.values()) and plan.nodes[plan.output].kind not in ("full", "feat")
        body, local = chunk([plan.nodes[r].args[0] for r in group], layout if last_read else again)
        for r in group:
            node = plan.nodes[r]
            v = local[node.args[0]]
            out = namer.fresh(var_name(node, names))
            if r in online.values():
                total_id = next(s for s, m in online.items() if m == r)
                m, s, new, safe, vv = (namer.fresh(n) for n in ("max_acc", "sum_acc", "max_new", "max_safe", "masked"))
                init += [
                    f'{m} = tl.full([BLOCK], float("-inf"), dtype={ftype})',
                    f"{s} = tl.zeros([BLOCK], dtype={ftype})",
                ]
                update += [
                    f'{vv} = tl.where(mask, {v}, float("-inf"))',
                    f"{new} = tl.maximum({m}, {vv})",
                    f'{safe} = tl.where({new} == float("-inf"), 0.0, {new})  # no inf - inf in a lane seen only masked',
                    f"{s} = {s} * tl.exp({m} - {safe}) + tl.exp({vv} - {safe})  # rescale to the new max",
                    f"{m} = {new}",
                ]
                total = namer.fresh(var_name(plan.nodes[total_id], names))
                final += [f"{out} = tl.max({m}, axis=0)", f"{total} = tl.sum({s} * tl.exp({m} - {out}), axis=0)"]
                values[r], values[total_id] = out, total
                continue
            if r in welford.values():
                sq_id = next(q for q, t in welford.items() if t == r)
                c, mu, m2, delta = (namer.fresh(n) for n in ("count_acc", "mean_acc", "m2_acc", "delta"))
                init += [f"{c} = tl.zeros([BLOCK], dtype={ftype})", f"{mu} = tl.zeros([BLOCK], dtype={ftype})"]
                init.append(f"{m2} = tl.zeros([BLOCK], dtype={ftype})")
                update += [
                    f"{c} += tl.where(mask, 1.0, 0.0)",
                    f"{delta} = {v} - {mu}",
                    f"{mu} += tl.where(mask, {delta} / tl.maximum({c}, 1.0), 0.0)",
                    f"{m2} += tl.where(mask, {delta} * ({v} - {mu}), 0.0)",
                ]
                count, mean, spread = (namer.fresh(n) for n in ("count", "mean", "spread"))
                squares = namer.fresh("squares")
                final += [
                    f"{count} = tl.sum({c}, axis=0)",
                    f"{mean} = tl.sum({mu} * {c}, axis=0) / {count}  # Welford: merge the lanes' means and M2s",
                    f"{spread} = {mu} - {mean}",
                    f"{out} = {mean} * {count}",
                    f"{squares} = tl.sum({m2} + {c} * {spread} * {spread}, axis=0)",
                ]
                values[r], values[sq_id] = out, squares
                continue
            loaded = plan.nodes[node.args[0]].op == "load"
            parts = accumulator(node.op, v, loaded, out, namer, Lanes("[BLOCK]", "cols", "n_cols", ftype))
            init, update, final = init + parts[0], update + parts[1], final + parts[2]
            values[r] = out
        lines += init + ["for start in range(0, n_cols, BLOCK):"] + [_I + x for x in body + update] + final
    hoist()
    output = plan.nodes[plan.output]
    if output.kind in ("full", "feat"):
        body, local = chunk([plan.output], layout)
        value = store(plan, local[plan.output], layout.compute)
        body.append(f"tl.store(out_ptr + row * n_cols + cols, {value}, mask=mask)")
        lines += ["for start in range(0, n_cols, BLOCK):  # write the output"] + [_I + x for x in body]
    else:
        lines += emit_chain(
            plan.nodes, _needed(plan, [plan.output], values), layout, values, namer, names, plan.sources
        )
        lines.append(f"tl.store(out_ptr + row, {store(plan, values[plan.output], layout.compute)})")
    return lines
