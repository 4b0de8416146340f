"""Recognition: which template covers each bundled problem (or the exact reason none does), and beyond."""

from __future__ import annotations

import textwrap

import pytest

from openkernel.generate.offline import recognise_source
from openkernel.generate.offline.configs import family_of
from openkernel.generate.offline.patterns import MatmulPlan, Plan
from openkernel.problems.loader import bundled_dir, bundled_names

ADVICE = "use --model with an LLM, or --model human"
SOFTMAX = ("load", "max", "sub", "exp", "sum", "div")
RMSNORM = ("load", "mul", "sum", "ncols", "div", "const", "add", "rsqrt", "mul", "load", "mul")
LAYERNORM = (
    *("load", "sum", "ncols", "div", "sub", "mul", "sum", "div", "const", "add", "rsqrt"),
    *("mul", "load", "mul", "load", "add"),
)
# problem -> (template, family, frame, the live graph's ops in order), or the matmul's summary, or the reason.
EXPECTED: dict[str, object] = {
    "attention_fp16": "no offline template for attention (aten.bmm -> aten._safe_softmax -> aten.bmm, as "
    f"scaled_dot_product_attention traces): {ADVICE}",
    "conv2d_relu_fp32": f"no offline template for aten.convolution: {ADVICE}",
    "gelu_scale_shift_fp32": ("pointwise", "tiled", (16384, 4096), ("load", "gelu", "load", "mul", "load", "add")),
    "layernorm_fp32": ("layernorm", "row", (16384, 4096), LAYERNORM),
    "linear_bias_gelu_fp16": ("matmul", "aten.addmm", (1, 8192, 16384, 4096), False, True, ("add", "gelu")),
    "log_softmax_fp32": ("log_softmax", "row", (16384, 4096), ("load", "max", "sub", "exp", "sum", "log", "sub")),
    "matmul_bf16": ("matmul", "aten.mm", (1, 8192, 8192, 8192), False, False, ()),
    "matmul_fp32": ("matmul", "aten.mm", (1, 4096, 4096, 4096), False, False, ()),
    "rmsnorm_bf16": ("rmsnorm", "row", (16384, 8192), RMSNORM),
    "rmsnorm_fp16": ("rmsnorm", "row", (16384, 8192), RMSNORM),
    "row_max_fp16": ("reduction", "row", (32768, 8192), ("load", "max")),
    "row_sum_fp32": ("reduction", "row", (32768, 4096), ("load", "sum")),
    "softmax_bf16": ("softmax", "row", (16384, 8192), SOFTMAX),
    "softmax_fp32": ("softmax", "row", (16384, 4096), SOFTMAX),
    "swish_residual_fp16": ("pointwise", "pointwise", (16384, 8192), ("load", "sigmoid", "mul", "load", "add")),
}


def summary(plan: Plan) -> tuple[object, ...]:
    if isinstance(plan, MatmulPlan):
        shape = (plan.batch, plan.m, plan.n, plan.k)
        return (plan.template, plan.op, shape, plan.a.transposed, plan.b.transposed, plan.epilogue_ops)
    return (plan.template, family_of(plan), plan.frame.shape, tuple(plan.nodes[i].op for i in plan.live()))


def recognised(source: str) -> object:
    found = recognise_source(source)
    return summary(found.plan) if found.plan is not None else found.reason


def test_every_bundled_problem_is_listed() -> None:
    assert bundled_names() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_problem_gets_its_template_or_the_uncovered_op(name: str) -> None:
    assert recognised((bundled_dir() / f"{name}.py").read_text()) == EXPECTED[name]


def test_norm_constants_and_weights_come_from_the_trace() -> None:
    layernorm = recognise_source((bundled_dir() / "layernorm_fp32.py").read_text()).plan
    rmsnorm = recognise_source((bundled_dir() / "rmsnorm_bf16.py").read_text()).plan
    assert layernorm is not None and rmsnorm is not None
    consts = [[n.attr for n in p.nodes if n.op == "const"] for p in (layernorm, rmsnorm)]
    loads = [[p.sources[int(n.attr or 0)].name for n in p.nodes if n.op == "load"] for p in (layernorm, rmsnorm)]
    assert consts == [[1e-05], [1.0, 1e-06]]  # rmsnorm's 1.0 is pow(x, 2)'s unused start, dead code
    assert loads == [["x", "self.norm.weight", "self.norm.bias"], ["x", "self.weight"]]


def reference(forward: str, inputs: str, init: str = "", args: str = "") -> str:
    """A KernelBench-style file with the given forward body and inputs."""
    return textwrap.dedent(
        f"""
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Model(nn.Module):
            def __init__(self{args}):
                super().__init__()
                {init or "pass"}

            def forward(self, x, y=None):
                return {forward}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
        """
    )


CASES = {
    "argmax": (reference("torch.argmax(x * 2.0, dim=-1)", "[torch.randn(8, 300)]"), ("reduction", "row", (8, 300))),
    "statistics": (
        reference(
            "F.normalize(x, dim=-1) + torch.var(x, -1, keepdim=True) + torch.logsumexp(x, -1, keepdim=True)",
            "[torch.randn(3, 5, 300)]",
        ),
        ("row_fused", "row", (3, 5, 300)),
    ),
    "layernorm_two_dims": (
        reference("torch.relu(F.layer_norm(x, (6, 50)))", "[torch.randn(4, 6, 50)]"),
        ("layernorm", "row", (4, 6, 50)),
    ),
    "broadcast_column": (
        reference("torch.tanh(x * y + 1.5)", "[torch.randn(17, 30), torch.randn(17, 1)]"),
        ("pointwise", "tiled", (17, 30)),
    ),
    "all_elements": (reference("(x * x).mean()", "[torch.randn(30, 40)]"), ("reduction", "row", (30, 40))),
    "middle_dimension": (
        reference("torch.relu(x).sum(dim=1) * 0.5", "[torch.randn(3, 37, 21)]"),
        ("reduction", "strided", (3, 37, 21), ("load", "relu", "sum", "const", "mul")),
    ),
    "bmm_transposed": (
        reference("torch.relu(torch.bmm(x, y.transpose(1, 2)))", "[torch.randn(3, 33, 40), torch.randn(3, 29, 40)]"),
        ("matmul", "aten.bmm", (3, 33, 29, 40), False, True, ("relu",)),
    ),
    "linear_on_3d_with_residual": (
        reference(
            "self.proj(x) + y",
            "[torch.randn(2, 21, 48), torch.randn(2, 21, 36)]",
            init="self.proj = nn.Linear(48, 36)",
        ),
        ("matmul", "aten.addmm", (1, 42, 36, 48), False, True, ("add", "add")),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_patterns_beyond_the_bundled_set(case: str) -> None:
    source, expected = CASES[case]
    got = recognised(source)
    assert isinstance(got, tuple)
    assert got[: len(expected)] == expected


@pytest.mark.parametrize(
    ("forward", "inputs", "reason"),
    [
        (
            "torch.softmax(x, dim=0)",
            "[torch.randn(30, 40)]",
            "no offline template for chained reductions over dimension(s) [0] of [30, 40] (softmax and norms "
            f"reduce the last dimension): {ADVICE}",
        ),
        (
            "x.sum(dim=(0, 2))",
            "[torch.randn(3, 4, 5)]",
            f"no offline template for aten.sum over dimensions [0, 2] of [3, 4, 5]: the templates reduce neighbouring "
            f"dimensions; {ADVICE}",
        ),
        (
            "x.add_(1.0)",
            "[torch.randn(4, 8)]",
            "no offline template for aten.add_: the reference modifies an input in place",
        ),
        (
            "(x, x * 2)",
            "[torch.randn(4, 8)]",
            "no offline template for a forward that returns 2 values: the templates write one tensor",
        ),
        ("torch.cumsum(x, dim=-1)", "[torch.randn(4, 8)]", f"no offline template for aten.cumsum: {ADVICE}"),
        (
            "x",
            "[torch.randn(4, 8)]",
            "no offline template for a forward that returns an input unchanged: there is nothing to compute",
        ),
        (
            "x.t() * 2.0",
            "[torch.randn(4, 8)]",
            f"no offline template for how x [4, 8] broadcasts against [8, 4]: {ADVICE}",
        ),
    ],
)
def test_what_no_template_covers_is_named(forward: str, inputs: str, reason: str) -> None:
    assert recognised(reference(forward, inputs)) == reason


def test_a_reference_that_cannot_run_on_meta_says_why() -> None:
    found = recognise_source(reference("x.sum().item() * x", "[torch.randn(4, 8)]"))
    assert found.plan is None and found.reason is not None
    assert found.reason.startswith("cannot trace the reference on the meta device (")
    broken = recognise_source("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    assert broken.reason == "cannot trace the reference: it defines no get_inputs()"


def test_sessions_in_threads_trace_their_references_at_the_same_time() -> None:
    # make_fx keeps global state; six threads at once used to fail with "CURRENT_PATCHER is None".
    from concurrent.futures import ThreadPoolExecutor

    from openkernel import load_problem
    from openkernel.generate.offline.trace import Trace, trace_reference

    names = ["softmax_fp32", "layernorm_fp32", "row_sum_fp32", "matmul_bf16", "rmsnorm_fp16", "gelu_scale_shift_fp32"]
    with ThreadPoolExecutor(len(names)) as pool:
        traces = list(pool.map(lambda n: trace_reference(load_problem(n).path.read_text()), names))
    assert all(isinstance(t, Trace) for t in traces)
