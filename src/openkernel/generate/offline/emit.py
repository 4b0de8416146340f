"""The complete candidate file: imports, the kernel, and ``ModelNew`` around it.

``ModelNew.__init__`` is the reference's own ``__init__`` (same signature, same parameters and
buffers under the same names, built the same way), so the evaluator shares the reference's weights
and the kernel reads them where the reference did; ``forward`` reads its sizes at run time, so one
file serves the small CPU check and the full GPU size alike. Two comment lines carry the launch
configuration and the ones tried before it, which is how a later iteration knows what was tried.
"""

from __future__ import annotations

import ast
import re
import textwrap

from openkernel.generate.offline.configs import Config
from openkernel.generate.offline.exprs import HELPERS, helpers_used
from openkernel.generate.offline.matmul import matmul_kernel
from openkernel.generate.offline.patterns import MatmulPlan, Plan, RowPlan
from openkernel.generate.offline.templates import KernelCode, row_kernel, source_names
from openkernel.generate.offline.trace import ADVICE, Trace, Uncovered

__all__ = ["CONFIG_MARK", "TRIED_MARK", "describe", "emit_candidate", "kernel_name"]

CONFIG_MARK = "# offline config:"
TRIED_MARK = "# offline tried before this kernel:"
_OURS = ("import math", "import torch", "import torch.nn as nn", "import triton", "import triton.language as tl")


def kernel_name(plan: Plan) -> str:
    if isinstance(plan, MatmulPlan):
        extra = [op for op in plan.epilogue_ops if op not in ("add", "mul")][:2]
        return "_".join(["matmul", *(["bias"] if "add" in plan.epilogue_ops else []), *extra, "kernel"])
    if plan.template == "pointwise":
        ops: list[str] = []
        for i in plan.live():
            op = plan.nodes[i].op
            if op not in ("load", "const", "ncols") and op not in ops:
                ops.append(op)
        return "_".join(["fused", *ops[:3], "kernel"])
    if plan.template == "reduction":
        where = "col" if plan.frame.strided else "row"
        return f"{where}_{plan.nodes[plan.reductions[0]].op}_kernel"
    return f"{plan.template}_kernel"


def describe(plan: Plan, config: Config) -> str:
    """What the kernel does and how it is laid out, in one sentence."""
    if isinstance(plan, MatmulPlan):
        precision = (
            "fp32 at ieee precision (no TF32)" if plan.in_dtype.itemsize == 4 else "tensor cores, fp32 accumulation"
        )
        ops = ", ".join(plan.epilogue_ops) or "none"
        return (
            f"a tiled matmul for {plan.op} ({config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']} tiles, "
            f"{config['warps']} warps, {config['stages']} stages, GROUP_M {config['GROUP_M']}; {precision}) with the "
            f"epilogue fused ({ops})"
        )
    what = {
        "pointwise": "one fused elementwise pass",
        "reduction": f"a row {plan.nodes[plan.output].op} reduction",
        "softmax": "row softmax",
        "log_softmax": "row log-softmax",
        "layernorm": "layer normalisation over the row",
        "rmsnorm": "RMS normalisation over the row",
        "row_fused": "row reductions with the pointwise ops around them fused",
    }[plan.template]
    hints = "; cache hints on the loads" if config.family != "strided" and config["evict"] == "hints" else ""
    if config.family == "pointwise":
        return f"{what} over the flat elements, BLOCK {config['BLOCK']}, {config['warps']} warps{hints}"
    if config.family == "tiled":
        tiles = f"[{config['ROWS']} x {config['BLOCK']}] tiles of rows and columns"
        return f"{what} over {tiles}, {config['warps']} warps{hints}"
    if config.family == "strided":
        return (
            f"{what.replace('row ', '')} over a middle dimension, [{config['BLOCK_R']} x {config['BLOCK_I']}] tiles "
            f"(reduced x contiguous), {config['warps']} warps"
        )
    warps = "warps scaled with the block" if config["warps"] == "auto" else f"{config['warps']} warps"
    persistent = ", persistent programs" if config["persistent"] == "yes" else ""
    if config["variant"] == "looped":
        return f"{what}, one program per row reading it in {config['BLOCK']}-wide chunks, {warps}{persistent}{hints}"
    rows = "one program per row" if config["ROWS"] == 1 else f"{config['ROWS']} rows per program"
    return f"{what}, {rows} with the whole row in registers (one pass), {warps}{persistent}{hints}"


def _reference_parts(problem_source: str) -> tuple[list[str], list[str], str | None]:
    """(the reference's imports, the top-level definitions its __init__ needs, __init__ re-indented)."""
    tree = ast.parse(problem_source)
    imports = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and not (
            isinstance(node, ast.ImportFrom) and node.module == "__future__"
        ):
            text = ast.get_source_segment(problem_source, node) or ""
            if text not in _OURS and text not in ("import torch.nn", "from torch import nn"):
                imports.append(text)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = None
    if model is not None:
        init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return imports, [], None
    segment = ast.get_source_segment(problem_source, init, padded=True) or ""
    text = textwrap.indent(textwrap.dedent(segment), "    ")
    text = re.sub(r"super\(\s*Model\s*,\s*self\s*\)", "super()", text)
    definitions: dict[str, ast.stmt] = {}
    local = {a.arg for a in ast.walk(init.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(init) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name not in (
            "Model",
            "get_inputs",
            "get_init_inputs",
        ):
            definitions[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    definitions[target.id] = node
    needed: list[ast.stmt] = []
    stack = [init]
    while stack:
        loaded = {n.id for n in ast.walk(stack.pop()) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for name in loaded - local:
            found = definitions.get(name)
            if found is not None and found not in needed:
                needed.append(found)
                stack.append(found)  # type: ignore[arg-type]
    ordered = [n for n in tree.body if n in needed]
    return imports, [ast.get_source_segment(problem_source, n) or "" for n in ordered], text


def _row_forward(plan: RowPlan, code: KernelCode, names: dict[int, str], trace: Trace) -> list[str]:
    lines: list[str] = []
    for index, var in names.items():
        source = plan.sources[index]
        lines.append(f"{var} = {source.name}.contiguous()")
    k = plan.frame.k
    lines.append(f"shape = {_frame_shape(plan, names)}  # the [rows, cols] frame the kernel walks")
    out_kind = plan.nodes[plan.output].kind
    if plan.frame.strided:
        start, end = plan.frame.start, (plan.frame.start or 0) + k
        lines += [
            f"n_outer = math.prod(shape[:{start}])",
            f"n_red = math.prod(shape[{start}:{end}])  # the reduced dimension(s)",
            f"n_inner = math.prod(shape[{end}:])",
        ]
        kept = f"{'1, ' * k}".rstrip(", ")
        keep = plan.out_shape != plan.frame.lead + plan.frame.inner
        out_shape = f"(*shape[:{start}], {kept}, *shape[{end}:])" if keep else f"(*shape[:{start}], *shape[{end}:])"
    elif plan.template != "pointwise" or "n_rows" in code.params:
        lines.append("n_cols = shape[-1]" if k == 1 else f"n_cols = math.prod(shape[-{k}:])")
        lines.append(f"n_rows = math.prod(shape[:-{k}])  # every leading dimension together")
    if plan.frame.strided:
        pass  # out_shape set above
    elif out_kind == "full":
        out_shape = "shape" if plan.out_shape == plan.frame.shape else _shape_of(plan, names, plan.out_shape)
    elif plan.out_shape == plan.frame.lead:
        out_shape = f"shape[:-{k}]"
    else:
        out_shape = f"(*shape[:-{k}], {'1, ' * k})".replace(", )", ")")
    inputs = [var for i, var in names.items() if plan.sources[i].role == "input"]
    device = (inputs or list(names.values()))[0]
    lines.append(f"out = torch.empty({out_shape}, dtype={plan.out_dtype}, device={device}.device)")
    return lines + list(code.launch) + ["return out"]


def _frame_shape(plan: RowPlan, names: dict[int, str]) -> str:
    """The frame's shape at run time, read off a tensor the kernel reads (the frame is traced at full size)."""
    frame = plan.frame
    shaped = [(plan.sources[i].meta.shape, var) for i, var in names.items() if _kind(plan, i) != "scal"]
    for traced, var in shaped:
        if traced == frame.shape:
            return f"{var}.shape"
    k = frame.k
    for traced, var in shaped:  # x [B, S, D] viewed as [B * S, D]: the leading dimensions regrouped into one
        if not frame.strided and len(frame.lead) == 1 and tuple(traced[len(traced) - k :]) == frame.trail:
            return f"(math.prod({var}.shape[:-{k}]), *{var}.shape[-{k}:])"
    if (
        shaped
        and all(len(t) <= len(frame.shape) for t, _ in shaped)
        and _broadcasts(frame.shape, [t for t, _ in shaped])
    ):
        return f"torch.broadcast_shapes({', '.join(f'{v}.shape' for _, v in shaped)})"
    first = f"{shaped[0][1]} {list(shaped[0][0])}" if shaped else "its inputs"
    raise Uncovered(
        f"no offline template for a view that reshapes {first} into {list(frame.shape)} before the kernel: {ADVICE}"
    )


def _shape_of(plan: RowPlan, names: dict[int, str], traced: tuple[int, ...]) -> str:
    """A run-time expression for ``traced``: the shape of an input that had it."""
    for index, var in names.items():
        if plan.sources[index].meta.shape == traced:
            return f"{var}.shape"
    raise Uncovered(f"no offline template for an output of shape {list(traced)} that no input has: {ADVICE}")


def _broadcasts(frame: tuple[int, ...], shapes: list[tuple[int, ...]]) -> bool:
    padded = [(1,) * (len(frame) - len(s)) + tuple(s) for s in shapes]
    return all(max(p[d] for p in padded) == frame[d] for d in range(len(frame)))


def _kind(plan: RowPlan, index: int) -> str:
    return next(n.kind for n in plan.nodes if n.op == "load" and n.attr == index)


def emit_candidate(plan: Plan, config: Config, trace: Trace, problem_source: str, tried: tuple[Config, ...]) -> str:
    """The candidate file's source for ``plan`` launched with ``config``."""
    name = kernel_name(plan)
    if isinstance(plan, MatmulPlan):
        code, forward = matmul_kernel(plan, config, name)
        nodes = list(plan.nodes)
    else:
        used = sorted({int(n.attr or 0) for i in plan.live() if (n := plan.nodes[i]).op == "load"})
        if not used:
            raise Uncovered("no offline template for a forward that reads none of its inputs")
        names = source_names(plan, plan.sources, used)
        code = row_kernel(plan, config, name, names)
        forward = _row_forward(plan, code, names, trace)
        nodes = [plan.nodes[i] for i in plan.live()]
    imports, definitions, init = _reference_parts(problem_source)
    tensors = {s.name for s in trace.sources if s.role == "input"}
    args = ", ".join(f"{p}: torch.Tensor" if p in tensors else p for p in trace.forward_params)
    summary = describe(plan, config)
    first = textwrap.fill(f"Offline generator, {plan.template} template: {summary}.", 100)
    header = [
        f'"""{first}',
        "",
        "Written from the reference's traced ATen ops; the kernel does all the compute, ModelNew only",
        "holds the reference's parameters (same names, so the evaluator shares its weights) and launches it.",
        '"""',
        "",
        *_OURS,
        *imports,
        "",
        f"{CONFIG_MARK} {config.family} {config.tag()}",
        f"{TRIED_MARK} {'; '.join(c.tag() for c in tried) or 'none'}",
        "",
    ]
    parts = ["\n".join(header), *definitions, *(HELPERS[h] for h in helpers_used(nodes)), code.text]
    doc = textwrap.fill(f"{summary[0].upper()}{summary[1:]}.", 100, subsequent_indent="    ")
    docstring = [f'    """{doc}"""'] if "\n" not in doc else [f'    """{doc}', '    """']
    cls = ["class ModelNew(nn.Module):", *docstring, ""]
    if init is not None:
        cls += [init.rstrip(), ""]
    cls.append(f"    def forward(self, {args}) -> torch.Tensor:")
    cls += [f"        {line}" for line in forward]
    parts.append("\n".join(cls))
    return "\n\n\n".join(p.rstrip("\n") for p in parts) + "\n"
