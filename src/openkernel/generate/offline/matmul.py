"""The matmul template: a tiled ``tl.dot`` kernel with grouped tile order and a fused epilogue.

Operands are read in place through their strides (``x @ W^T`` reads ``W [N, K]`` transposed, no
copy). Tiles past the edge wrap (modulo) so the K loop needs no M/N mask; the partial last K step is
zero-filled; the store masks. The epilogue (bias, activation, scale, residual) runs on the fp32
accumulator, so the output is written once and rounded once. fp32 problems use
``input_precision="ieee"`` (true fp32 products, no TF32: the problem's tolerance needs it, and it
runs on the FMA units, so it loses to cuBLAS's fp32 path); fp16/bf16 run on tensor cores.
"""

from __future__ import annotations

import torch

from openkernel.generate.offline.configs import Config
from openkernel.generate.offline.exprs import Layout, Namer, emit_chain
from openkernel.generate.offline.patterns import MatmulPlan, Operand
from openkernel.generate.offline.templates import KernelCode, source_names

__all__ = ["matmul_kernel"]

_I = "    "


def _operand_expr(plan: MatmulPlan, operand: Operand, batched: bool) -> str:
    """The forward's expression for what the kernel reads: a [M, K] / [K, N] view (batched: [B, ., .])."""
    src = plan.sources[operand.source].name
    if not batched:
        if operand.rank == 2:
            return f"{src}.t()" if operand.transposed else src
        return f"{src}.reshape(-1, {src}.shape[-1])"  # leading dimensions are rows of A
    view = f"{src}.transpose(-2, -1)" if operand.transposed else src
    if operand.rank == 2:
        return f"{view}[None]"  # one matrix for every batch: batch stride 0 below
    return view if operand.rank == 3 else f"{view}.reshape(-1, *{view}.shape[-2:])"


def matmul_kernel(plan: MatmulPlan, config: Config, name: str) -> tuple[KernelCode, list[str]]:
    batched = plan.op in ("aten.bmm", "aten.baddbmm")
    live = [i for i in range(len(plan.nodes)) if i in set(_live(plan))]
    used = sorted({int(plan.nodes[i].attr or 0) for i in live if plan.nodes[i].op == "load"})
    names = source_names(plan, plan.sources, used)
    out_dt = str(plan.out_dtype).removeprefix("torch.")
    in_dt = str(plan.in_dtype).removeprefix("torch.")
    a_name, b_name = plan.sources[plan.a.source].name, plan.sources[plan.b.source].name
    a_t = " transposed" if plan.a.transposed else ""
    b_t = " transposed" if plan.b.transposed else ""
    head = [
        "@triton.jit",
        f"def {name}(",
        f"    out_ptr,  # *{out_dt} [{'B * ' if batched else ''}M, N], contiguous: the output",
        f"    a_ptr,  # *{in_dt} [{'B, ' if batched else ''}M, K]: {a_name}{a_t}, read through its strides",
        f"    b_ptr,  # *{in_dt} [{'B, ' if batched else ''}K, N]: {b_name}{b_t}, read through its strides",
    ]
    params = ["out", "lhs", "rhs"]
    for index, var in names.items():
        kind = next(n.kind for n in plan.nodes if n.op == "load" and n.attr == index)
        what = {"full": "one per output element", "feat": "one per column", "row": "one per row", "scal": "one value"}
        head.append(f"    {var}_ptr,  # {plan.sources[index].name}: {what[kind]}, contiguous")
        params.append(var)
    sizes = [
        ("M", "rows of A and of the output"),
        ("N", "columns of B and of the output"),
        ("K", "the reduced dimension"),
    ]
    strides = [("stride_am", "elements between rows of A"), ("stride_ak", "elements between columns of A")]
    strides += [("stride_bk", "elements between rows of B"), ("stride_bn", "elements between columns of B")]
    if batched:
        strides += [
            ("stride_ab", "elements between batches of A"),
            ("stride_bb", "elements between batches of B (0: shared)"),
        ]
    for param, comment in sizes + strides:
        head.append(f"    {param},  # {comment}")
    params += ["m", "n", "k", "lhs.stride(-2)", "lhs.stride(-1)", "rhs.stride(-2)", "rhs.stride(-1)"]
    if batched:
        params += ["lhs.stride(0)", "0 if rhs.shape[0] == 1 else rhs.stride(0)"]
    head += [
        "    BLOCK_M: tl.constexpr,  # rows of the output per program",
        "    BLOCK_N: tl.constexpr,  # columns of the output per program",
        "    BLOCK_K: tl.constexpr,  # depth of one K step",
        "    GROUP_M: tl.constexpr,  # tile rows per group: neighbouring programs share B tiles in L2",
    ]
    bf16 = plan.in_dtype == torch.bfloat16
    if bf16:
        head.append(
            "    CPU_BF16: tl.constexpr,  # running in the Triton interpreter (CPU), whose bf16 tl.dot is wrong"
        )
    head.append("):")
    body = [
        "# Grouped ordering: walk GROUP_M tile rows down a column of tiles before moving right.",
        "pid = tl.program_id(0)",
        "num_pid_m = tl.cdiv(M, BLOCK_M)",
        "num_pid_n = tl.cdiv(N, BLOCK_N)",
        "num_pid_in_group = GROUP_M * num_pid_n",
        "first_pid_m = (pid // num_pid_in_group) * GROUP_M",
        "group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)",
        "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m",
        "pid_n = (pid % num_pid_in_group) // group_size_m",
    ]
    if batched:
        body += [
            "pid_b = tl.program_id(1).to(tl.int64)  # the batch",
            "a_ptr += pid_b * stride_ab",
            "b_ptr += pid_b * stride_bb",
        ]
    dot = 'tl.dot(a_tile, b_tile, acc, input_precision="ieee")  # true fp32 products, no TF32'
    if plan.in_dtype.itemsize == 2:
        dot = "tl.dot(a_tile, b_tile, acc)  # tensor-core products, fp32 accumulation"
    body += [
        "# Rows/columns past the edge wrap (modulo), so A and B loads need no M/N mask; the store masks them.",
        "offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M",
        "offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N",
        "offs_k = tl.arange(0, BLOCK_K)",
        "a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak",
        "b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "for kt in range(0, tl.cdiv(K, BLOCK_K)):",
        _I + "k_left = K - kt * BLOCK_K  # the last K step is partial: zero-fill past K",
        _I + "a_tile = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)",
        _I + "b_tile = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)",
        *(
            [
                _I + "if CPU_BF16:  # the same exact products in fp32: the interpreter multiplies raw bf16 bits",
                _I + _I + "a_tile = a_tile.to(tl.float32)",
                _I + _I + "b_tile = b_tile.to(tl.float32)",
            ]
            if bf16
            else []
        ),
        _I + f"acc = {dot}",
        _I + "a_ptrs += BLOCK_K * stride_ak",
        _I + "b_ptrs += BLOCK_K * stride_bk",
        "# Epilogue on the fp32 accumulator: one write, one rounding.",
        "offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "row_mask = offs_m < M",
        "col_mask = offs_n < N",
        "mask = row_mask[:, None] & col_mask[None, :]",
        "rows = pid_b * M + offs_m" if batched else "rows = offs_m.to(tl.int64)  # int64: rows * N may pass 2**31",
    ]
    layout = Layout("tile", row="rows", cols="offs_n", mask="mask", col_mask="col_mask", row_mask="row_mask", ncols="N")
    acc_id = next(i for i, n in enumerate(plan.nodes) if n.op == "acc")
    values = {acc_id: "acc"}
    body += emit_chain(plan.nodes, live, layout, values, Namer(set(names.values())), names, plan.sources)
    value = values[plan.output]
    value = value if out_dt == "float32" else f"{value}.to(out_ptr.dtype.element_ty)"
    body.append(f"tl.store(out_ptr + rows[:, None] * N + offs_n[None, :], {value}, mask=mask)")
    text = "\n".join(head + [_I + line for line in body]) + "\n"
    forward = [
        f"lhs = {_operand_expr(plan, plan.a, batched)}  # [{'B, ' if batched else ''}M, K]",
        f"rhs = {_operand_expr(plan, plan.b, batched)}  # [{'B, ' if batched else ''}K, N], no copy",
    ]
    if batched:
        forward += ["batch, m, k = lhs.shape", "n = rhs.shape[-1]"]
    else:
        forward += ["m, k = lhs.shape", "n = rhs.shape[1]"]
    forward += [f"{var} = {plan.sources[i].name}.contiguous()" for i, var in names.items()]
    rows = "batch * m" if batched else "m"
    forward.append(f"out = torch.empty(({rows}, n), dtype={plan.out_dtype}, device=lhs.device)")
    c = config
    forward += [
        f"block_m, block_n, block_k = {c['BLOCK_M']}, {c['BLOCK_N']}, {c['BLOCK_K']}",
        f"grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n), {'batch' if batched else '1'})",
        f"{name}[grid](",
        *(f"    {p}," for p in params),
        "    BLOCK_M=block_m,",
        "    BLOCK_N=block_n,",
        "    BLOCK_K=block_k,",
        f"    GROUP_M={c['GROUP_M']},",
        *(["    CPU_BF16=not out.is_cuda,"] if bf16 else []),
        f"    num_warps={c['warps']},",
        f"    num_stages={c['stages']},",
        ")",
        f"return out.view({_out_shape(plan, batched)})",
    ]
    code = KernelCode(name, text, tuple(params), ())
    return code, forward


def _out_shape(plan: MatmulPlan, batched: bool) -> str:
    a = plan.sources[plan.a.source].name
    rank = len(plan.out_shape)
    if not batched:
        return f"*{a}.shape[:-1], n" if rank > 2 and plan.a.rank == rank else "m, n"
    return "batch, m, n" if rank == 3 else f"*{a}.shape[:-2], m, n"


def _live(plan: MatmulPlan) -> list[int]:
    seen: set[int] = set()
    stack = [plan.output]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(plan.nodes[i].args)
    return sorted(seen)
