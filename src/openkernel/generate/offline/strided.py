"""The strided reduction template: a reduction over a middle dimension (``x.sum(dim=0)`` of ``[M, N]``).

The input is seen as ``[outer, red, inner]``. Each program owns one ``outer`` index and ``BLOCK_I``
contiguous ``inner`` columns (so loads are coalesced), walks ``red`` in ``BLOCK_R``-deep steps
keeping per-lane accumulators, and reduces them along the step axis at the end. Pointwise ops
before the reduction (on same-shape tensors and scalars) and after it (on the reduced values) are
fused; one pass only, so softmax and norms (a reduction feeding another) stay on the last dimension.
"""

from __future__ import annotations

from collections.abc import Callable

from openkernel.generate.offline.configs import Config
from openkernel.generate.offline.exprs import Layout, Namer, emit_chain, var_name
from openkernel.generate.offline.graph import REDUCTIONS
from openkernel.generate.offline.looped import Lanes, accumulator
from openkernel.generate.offline.patterns import RowPlan

__all__ = ["strided_body", "strided_launch"]

_I = "    "


def strided_body(plan: RowPlan, names: dict[int, str], store: Callable[[RowPlan, str, str], str]) -> list[str]:
    """The kernel body (after the signature): the loop over the reduced dimension, then the store."""
    layout = Layout(
        "strided", row="outer", cols="inner", mask="mask", col_mask="inner_mask", ncols="n_red", compute=plan.compute
    )
    namer = Namer(set(names.values()))
    live = plan.live()
    lines = [
        "outer = tl.program_id(0).to(tl.int64)  # int64: offsets may pass 2**31",
        "inner = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
        "inner_mask = inner < n_inner",
        "base = outer * n_red * n_inner",
    ]
    values: dict[int, str] = {}
    scalars = [i for i in live if plan.nodes[i].kind == "scal"]
    lines += emit_chain(plan.nodes, scalars, layout, values, namer, names, plan.sources)
    reductions = [i for i in live if plan.nodes[i].op in REDUCTIONS]
    local = dict(values)
    prologue = sorted({j for r in reductions for j in _below(plan, plan.nodes[r].args[0])} - set(local))
    body = [
        "red = start + tl.arange(0, BLOCK_R)",
        "mask = (red < n_red)[:, None] & inner_mask[None, :]",
        *emit_chain(plan.nodes, prologue, layout, local, namer, names, plan.sources),
    ]
    init: list[str] = []
    final: list[str] = []
    lanes = Lanes("[BLOCK_R, BLOCK_I]", "red[:, None]", "n_red", f"tl.{plan.compute}")
    for r in reductions:
        node = plan.nodes[r]
        out = namer.fresh(var_name(node, names))
        loaded = plan.nodes[node.args[0]].op == "load"
        first, update, last = accumulator(node.op, local[node.args[0]], loaded, out, namer, lanes)
        init, body, final = init + first, body + update, final + last
        values[r] = out
    lines += init + ["for start in range(0, n_red, BLOCK_R):"] + [_I + line for line in body] + final
    epilogue = sorted(_below(plan, plan.output, stop=set(values)))
    lines += emit_chain(plan.nodes, epilogue, layout, values, namer, names, plan.sources)
    value = store(plan, values[plan.output], plan.compute)
    lines.append(f"tl.store(out_ptr + outer * n_inner + inner, {value}, mask=inner_mask)")
    return lines


def _below(plan: RowPlan, i: int, stop: set[int] | None = None) -> set[int]:
    """The values ``i`` is computed from (itself included), stopping at reductions and at ``stop``."""
    seen: set[int] = set()
    stack = [i]
    while stack:
        j = stack.pop()
        if j not in seen and plan.nodes[j].op not in REDUCTIONS and j not in (stop or set()):
            seen.add(j)
            stack.extend(plan.nodes[j].args)
    return seen


def strided_launch(name: str, params: tuple[str, ...], config: Config) -> tuple[str, ...]:
    return (
        f"block_r, block_i = {config['BLOCK_R']}, {config['BLOCK_I']}  # reduced steps x contiguous columns",
        "grid = (n_outer, triton.cdiv(n_inner, block_i))",
        f"{name}[grid]({', '.join(params)}, BLOCK_R=block_r, BLOCK_I=block_i, num_warps={config['warps']})",
    )
