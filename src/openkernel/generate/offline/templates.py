"""Row-family templates: Triton kernels (and their launch code) for pointwise chains and row reductions.

Four kernel shapes cover a :class:`RowPlan`:

- *flat*: pointwise over the elements as one run (every tensor full-size or a scalar);
- *tiled*: pointwise over ``[rows, cols]`` tiles, for per-column (bias) or per-row operands;
- *one-pass*: one program per row (or per ``ROWS`` rows), the whole row in registers: every reduction
  and the output from a single read of the row (optionally persistent: a few programs per SM walk
  all the rows, loading the per-column weights once);
- *looped*: the row in ``BLOCK``-wide chunks, for rows too long for registers: one loop per level of
  reductions (online softmax and Welford fold the two levels of softmax and layernorm into one),
  then a loop that writes the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from openkernel.generate.offline.configs import Config
from openkernel.generate.offline.exprs import Layout, Namer, emit_chain
from openkernel.generate.offline.graph import REDUCTIONS, Graph
from openkernel.generate.offline.looped import looped_body
from openkernel.generate.offline.patterns import RowPlan
from openkernel.generate.offline.strided import strided_body, strided_launch

__all__ = ["KernelCode", "row_kernel", "source_names"]

PROGRAMS_PER_SM = 4  # persistent kernels: resident programs per SM, each walking many rows
_INDENT = "    "
# Persistent programs walk the rows; an int64 start makes the row index int64 (row * n_cols may pass 2**31).
_PERSISTENT_LOOP = "for row in range(tl.program_id(0).to(tl.int64), n_rows, tl.num_programs(0)):  # persistent"


@dataclass(frozen=True)
class KernelCode:
    """One kernel's text and the forward lines that launch it (after the inputs are prepared)."""

    name: str
    text: str
    params: tuple[str, ...]  # the kernel's pointer and size parameters, in order
    launch: tuple[str, ...]  # forward lines: sizes, block choice, grid, the launch


def source_names(plan: RowPlan | object, sources: tuple[object, ...], used: list[int]) -> dict[int, str]:
    """Variable names for the sources read: the attribute's last part (``weight``), unique and not reserved."""
    namer = Namer()
    names: dict[int, str] = {}
    for index in used:
        full = getattr(sources[index], "name", f"arg{index}")
        parts = [p for p in full.replace("(", ".").replace(")", "").replace("'", "").split(".") if p and p != "self"]
        base = parts[-1] if parts and parts[-1].isidentifier() else f"arg{index}"
        names[index] = namer.fresh(base)
    return names


def _dtype(torch_dtype: object) -> str:
    return str(torch_dtype).removeprefix("torch.")


def _store_value(plan: RowPlan, value: str, compute: str) -> str:
    return value if _dtype(plan.out_dtype) == compute else f"{value}.to(out_ptr.dtype.element_ty)"


def row_kernel(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    """The kernel and its launch for ``plan`` under ``config`` (family pointwise, tiled or row)."""
    if config.family == "pointwise":
        return _flat(plan, config, name, names)
    if config.family == "tiled":
        return _tiled(plan, config, name, names)
    if config.family == "strided":
        return _strided(plan, config, name, names)
    if config["variant"] == "looped":
        return _looped(plan, config, name, names)
    return _one_pass(plan, config, name, names)


def _signature(
    plan: RowPlan, name: str, names: dict[int, str], sizes: list[tuple[str, str]], consts: list[tuple[str, str]]
) -> tuple[list[str], tuple[str, ...]]:
    out_dt = _dtype(plan.out_dtype)
    lines = ["@triton.jit", f"def {name}(", f"    out_ptr,  # *{out_dt}: the output, contiguous"]
    params = ["out"]
    for index, var in names.items():
        source = plan.sources[index]
        kind = next(n.kind for n in plan.nodes if n.op == "load" and n.attr == index)
        what = {"full": "one value per element", "feat": "one per column", "row": "one per row", "scal": "one value"}[
            kind
        ]
        lines.append(f"    {var}_ptr,  # *{_dtype(source.meta.dtype)}: {source.name}, {what}, contiguous")
        params.append(var)
    for size, comment in sizes:
        lines.append(f"    {size},  # {comment}")
        params.append(size)
    for const, comment in consts:
        lines.append(f"    {const}: tl.constexpr,  # {comment}")
    lines.append("):")
    return lines, tuple(params)


def _live_split(plan: RowPlan) -> tuple[list[int], list[int]]:
    """(values that vary by column only or not at all, the rest), among the live ones."""
    live = plan.live()
    graph = Graph(list(plan.nodes))
    per_row = {i for i in live if _depends_on_rows(graph, i)}
    return [i for i in live if i not in per_row], [i for i in live if i in per_row]


def _depends_on_rows(graph: Graph, i: int) -> bool:
    node = graph.nodes[i]
    if node.kind in ("full", "row") or node.op in REDUCTIONS:
        return True
    return any(_depends_on_rows(graph, a) for a in node.args)


def _body(
    plan: RowPlan, layout: Layout, names: dict[int, str], ids: list[int], values: dict[int, str], namer: Namer
) -> list[str]:
    return emit_chain(plan.nodes, ids, layout, values, namer, names, plan.sources)


def _streamed(config: Config) -> str:
    """The cache hint for full-size values read once ("first"), or "" when the config asks for none."""
    return "first" if config["evict"] == "hints" else ""


def _auto_warps(elements: str) -> str:
    return f"num_warps = 4 if {elements} <= 2048 else 8 if {elements} <= 8192 else 16"


def _flat(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    layout = Layout("flat", cols="offs", compute=plan.compute, evict=_streamed(config))
    head, params = _signature(
        plan, name, names, [("n_elements", "number of elements")], [("BLOCK", "elements per program")]
    )
    body = [
        "pid = tl.program_id(0).to(tl.int64)  # int64: offsets may pass 2**31",
        "offs = pid * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < n_elements",
    ]
    values: dict[int, str] = {}
    body += _body(plan, layout, names, plan.live(), values, Namer(set(names.values())))
    body.append(f"tl.store(out_ptr + offs, {_store_value(plan, values[plan.output], plan.compute)}, mask=mask)")
    launch = (
        "n_elements = out.numel()",
        f"block = {config['BLOCK']}  # elements per program",
        f"num_warps = {config['warps']}",
        "grid = (triton.cdiv(n_elements, block),)",
        f"{name}[grid]({', '.join(params)}, BLOCK=block, num_warps=num_warps)",
    )
    return KernelCode(name, "\n".join(head + [_INDENT + line for line in body]) + "\n", params, launch)


def _tile_head(rows_from: str) -> list[str]:
    return [
        f"rows = {rows_from} + tl.arange(0, ROWS)",
        "row_mask = rows < n_rows",
        "rows = rows.to(tl.int64)  # int64: rows * n_cols may pass 2**31",
    ]


def _tiled(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    rows = int(config["ROWS"])
    sizes = [("n_rows", "rows: every leading dimension together"), ("n_cols", "row length: the last dimension")]
    consts = [("BLOCK", "columns per program")] + ([("ROWS", "rows per program")] if rows > 1 else [])
    head, params = _signature(plan, name, names, sizes, consts)
    if rows > 1:
        layout = Layout("tile", row="rows", mask="mask", col_mask="col_mask", row_mask="row_mask", compute=plan.compute,
                        evict=_streamed(config))  # fmt: skip
        body = _tile_head("tl.program_id(0) * ROWS")
        body += ["cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)", "col_mask = cols < n_cols"]
        body.append("mask = row_mask[:, None] & col_mask[None, :]")
        store = "out_ptr + rows[:, None] * n_cols + cols[None, :]"
    else:
        layout = Layout("row", compute=plan.compute, evict=_streamed(config))
        body = [
            "row = tl.program_id(0).to(tl.int64)  # int64: row * n_cols may pass 2**31",
            "cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
            "mask = cols < n_cols",
        ]
        store = "out_ptr + row * n_cols + cols"
    values: dict[int, str] = {}
    body += _body(plan, layout, names, plan.live(), values, Namer(set(names.values())))
    body.append(f"tl.store({store}, {_store_value(plan, values[plan.output], plan.compute)}, mask=mask)")
    rows_arg = ", ROWS=rows_per_program" if rows > 1 else ""
    launch = (
        f"block = {config['BLOCK']}  # columns per program",
        f"rows_per_program = {rows}",
        f"num_warps = {config['warps']}",
        "grid = (triton.cdiv(n_rows, rows_per_program), triton.cdiv(n_cols, block))",
        f"{name}[grid]({', '.join(params)}, BLOCK=block{rows_arg}, num_warps=num_warps)",
    )
    return KernelCode(name, "\n".join(head + [_INDENT + line for line in body]) + "\n", params, launch)


def _one_pass(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    rows = int(config["ROWS"])
    persistent = config["persistent"] == "yes"
    sizes = [("n_rows", "rows: every leading dimension together"), ("n_cols", "row length (the reduced dimension)")]
    consts = [("BLOCK", "power of two >= n_cols: the whole row in registers")]
    consts += [("ROWS", "rows per program")] if rows > 1 else []
    head, params = _signature(plan, name, names, sizes, consts)
    namer = Namer(set(names.values()))
    values: dict[int, str] = {}
    invariant, per_row = _live_split(plan)
    out_kind = plan.nodes[plan.output].kind
    if rows > 1:
        layout = Layout("tile", row="rows", mask="mask", col_mask="col_mask", row_mask="row_mask", compute=plan.compute,
                        evict=_streamed(config))  # fmt: skip
        body = ["cols = tl.arange(0, BLOCK)", "col_mask = cols < n_cols"]
        body += _body(plan, layout, names, invariant, values, namer)
        if persistent:
            loop = ["for first in range(tl.program_id(0) * ROWS, n_rows, tl.num_programs(0) * ROWS):"]
            row_head = _tile_head("first")
        else:
            loop, row_head = [], _tile_head("tl.program_id(0) * ROWS")
        row_head.append("mask = row_mask[:, None] & col_mask[None, :]")
        full_store = "out_ptr + rows[:, None] * n_cols + cols[None, :]", "mask"
        row_store = "out_ptr + rows", "row_mask"
    else:
        layout = Layout("row", compute=plan.compute, evict=_streamed(config))
        body = ["cols = tl.arange(0, BLOCK)", "mask = cols < n_cols"]
        body += _body(plan, layout, names, invariant, values, namer)
        if persistent:
            loop = [_PERSISTENT_LOOP]
            row_head = []
        else:
            loop = []
            row_head = [
                "row = tl.program_id(0).to(tl.int64)  # one program per row; int64: row * n_cols may pass 2**31"
            ]
        full_store = "out_ptr + row * n_cols + cols", "mask"
        row_store = "out_ptr + row", ""
    inner = row_head + _body(plan, layout, names, per_row, values, namer)
    where, mask = full_store if out_kind == "full" else row_store
    value = _store_value(plan, values[plan.output], plan.compute)
    inner.append(f"tl.store({where}, {value}, mask={mask})" if mask else f"tl.store({where}, {value})")
    indent = _INDENT if loop else ""
    body += loop + [indent + line for line in inner]
    launch = ["block = triton.next_power_of_2(n_cols)  # the whole row in one block"]
    launch.append(
        _auto_warps(f"{'rows_per_program * ' if rows > 1 else ''}block")
        if config["warps"] == "auto"
        else f"num_warps = {config['warps']}"
    )
    programs = "n_rows" if rows == 1 else "triton.cdiv(n_rows, rows_per_program)"
    if rows > 1:
        launch.insert(0, f"rows_per_program = {rows}")
    if persistent:
        launch.append("sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 4")
        launch.append(f"grid = (max(1, min({programs}, sms * {PROGRAMS_PER_SM})),)  # persistent programs")
    else:
        launch.append(f"grid = ({programs},)")
    rows_arg = ", ROWS=rows_per_program" if rows > 1 else ""
    launch.append(f"{name}[grid]({', '.join(params)}, BLOCK=block{rows_arg}, num_warps=num_warps)")
    return KernelCode(name, "\n".join(head + [_INDENT + line for line in body]) + "\n", params, tuple(launch))


def _strided(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    sizes = [
        ("n_outer", "the dimensions before the reduced ones, together"),
        ("n_red", "the reduced dimension(s)"),
        ("n_inner", "the dimensions after them (contiguous in memory)"),
    ]
    consts = [("BLOCK_R", "reduced elements per loop step"), ("BLOCK_I", "inner columns per program")]
    head, params = _signature(plan, name, names, sizes, consts)
    body = strided_body(plan, names, _store_value)
    text = "\n".join(head + [_INDENT + line for line in body]) + "\n"
    return KernelCode(name, text, params, strided_launch(name, params, config))


def _looped(plan: RowPlan, config: Config, name: str, names: dict[int, str]) -> KernelCode:
    persistent = config["persistent"] == "yes"
    sizes = [("n_rows", "rows: every leading dimension together"), ("n_cols", "row length (the reduced dimension)")]
    head, params = _signature(plan, name, names, sizes, [("BLOCK", "columns per step of the loops over the row")])
    layout = Layout("row", compute=plan.compute, evict=_streamed(config))
    inner = looped_body(plan, layout, names, _store_value)
    if persistent:
        body = [_PERSISTENT_LOOP] + [_INDENT + line for line in inner]
    else:
        body = ["row = tl.program_id(0).to(tl.int64)  # one program per row; int64: row * n_cols may pass 2**31"]
        body += inner
    launch = [f"block = min({config['BLOCK']}, triton.next_power_of_2(n_cols))  # columns per loop step"]
    launch.append(
        "num_warps = 4 if block <= 1024 else 8" if config["warps"] == "auto" else f"num_warps = {config['warps']}"
    )
    if persistent:
        launch.append("sms = torch.cuda.get_device_properties(out.device).multi_processor_count if out.is_cuda else 4")
        launch.append(f"grid = (max(1, min(n_rows, sms * {PROGRAMS_PER_SM})),)  # persistent programs")
    else:
        launch.append("grid = (n_rows,)")
    launch.append(f"{name}[grid]({', '.join(params)}, BLOCK=block, num_warps=num_warps)")
    return KernelCode(name, "\n".join(head + [_INDENT + line for line in body]) + "\n", params, tuple(launch))
