"""The emitted candidate files: complete, parseable, ModelNew like the reference, and right in every variant."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openkernel.generate.offline import recognise_source
from openkernel.generate.offline.configs import Config, default_config, family_of
from openkernel.generate.offline.emit import emit_candidate
from openkernel.problems.loader import bundled_dir

COVERED = [
    "gelu_scale_shift_fp32",
    "layernorm_fp32",
    "linear_bias_gelu_fp16",
    "log_softmax_fp32",
    "matmul_bf16",
    "matmul_fp32",
    "rmsnorm_bf16",
    "rmsnorm_fp16",
    "row_max_fp16",
    "row_sum_fp32",
    "softmax_bf16",
    "softmax_fp32",
    "swish_residual_fp16",
]
RUNNER = Path(__file__).with_name("run_candidates.py")


def emitted(source: str, tag: str | None = None) -> str:
    found = recognise_source(source)
    assert found.plan is not None and found.trace is not None, found.reason
    config = default_config(found.plan) if tag is None else Config.parse(family_of(found.plan), tag)
    assert config is not None
    return emit_candidate(found.plan, config, found.trace, source, ())


def init_args(tree: ast.Module, cls: str) -> list[str]:
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    return [a.arg for a in init.args.args] if init is not None else ["self"]


@pytest.mark.parametrize("name", COVERED)
def test_the_candidate_parses_and_defines_model_new_as_the_reference(name: str) -> None:
    reference = (bundled_dir() / f"{name}.py").read_text()
    text = emitted(reference)
    tree = ast.parse(text)
    kernels = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.decorator_list]
    classes = [c.name for c in tree.body if isinstance(c, ast.ClassDef)]
    assert classes == ["ModelNew"]
    assert len(kernels) == 1 and kernels[0].endswith("_kernel")
    assert init_args(tree, "ModelNew") == init_args(ast.parse(reference), "Model")
    marks = [line.split(":")[0] for line in text.splitlines() if line.startswith("# offline")]
    assert marks == ["# offline config", "# offline tried before this kernel"]


def test_matmul_precision_follows_the_problem() -> None:
    fp32 = emitted((bundled_dir() / "matmul_fp32.py").read_text())
    bf16 = emitted((bundled_dir() / "matmul_bf16.py").read_text())
    assert 'input_precision="ieee"' in fp32 and "input_precision" not in bf16
    assert "tl.dot(a_tile, b_tile, acc)  # tensor-core products, fp32 accumulation" in bf16


def test_a_row_fits_one_block_with_warps_scaled_to_it() -> None:
    text = emitted((bundled_dir() / "softmax_fp32.py").read_text())
    assert "block = triton.next_power_of_2(n_cols)  # the whole row in one block" in text
    assert "num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16" in text
    assert "grid = (n_rows,)" in text


def loads(text: str) -> list[str]:
    """The emitted kernel's load lines, stripped."""
    return [line.strip() for line in text.splitlines() if "tl.load(" in line]


def test_cache_hints_stream_the_rows_and_keep_the_weights() -> None:
    one_pass = "variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no"
    rmsnorm = (bundled_dir() / "rmsnorm_bf16.py").read_text()
    assert loads(emitted(rmsnorm, f"{one_pass} evict=hints")) == [
        'weight = tl.load(weight_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)',
        'x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)',
    ]
    # A tag written before the axis existed means no hints, as the kernels of that time had none.
    assert loads(emitted(rmsnorm, one_pass)) == [
        "weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)",
        "x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)",
    ]


def test_a_looped_row_keeps_its_chunks_in_l2_until_the_output_loop_reads_them() -> None:
    looped = "variant=looped BLOCK=1024 warps=auto ROWS=1 persistent=no evict=hints"
    layernorm = emitted((bundled_dir() / "layernorm_fp32.py").read_text(), looped)
    assert loads(layernorm) == [
        'x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0, eviction_policy="evict_last")',  # Welford loop
        'x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0, eviction_policy="evict_first")',  # output loop
        'weight = tl.load(weight_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last")',
        'bias = tl.load(bias_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last")',
    ]
    # A per-row output: the last loop over the row is the last read of it.
    row_max = emitted((bundled_dir() / "row_max_fp16.py").read_text(), looped)
    assert [line.split("eviction_policy=")[1] for line in loads(row_max)] == ['"evict_first").to(tl.float32)']


def write(tmp: Path, label: str, reference: str, tag: str | None) -> list[str]:
    ref, cand = tmp / f"ref_{label}.py", tmp / f"cand_{label}.py"
    ref.write_text(reference)
    cand.write_text(emitted(reference, tag))
    return [str(ref), str(cand)]


EXTRA = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(torch.randn(30))

        def forward(self, x, g):
            return {body}

    def get_inputs():
        return [torch.randn(17, 30, dtype={dtype}) * 2, torch.randn(17, 1, dtype={dtype})]

    def get_init_inputs():
        return []
    """
)
FP16, FP32 = "torch.float16", "torch.float32"
# label -> (reference text, config tag or None for the default)
VARIANTS: dict[str, tuple[str, str | None]] = {
    "softmax_looped": ("softmax_fp32", "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no"),
    "log_softmax_looped_persistent": ("log_softmax_fp32", "variant=looped BLOCK=512 warps=4 ROWS=1 persistent=yes"),
    "layernorm_welford": ("layernorm_fp32", "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no"),
    "layernorm_rows": ("layernorm_fp32", "variant=one_pass BLOCK=auto warps=auto ROWS=4 persistent=yes"),
    "rmsnorm_persistent": ("rmsnorm_fp16", "variant=one_pass BLOCK=auto warps=8 ROWS=1 persistent=yes"),
    "row_max_looped": ("row_max_fp16", "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no"),
    "gelu_rows": ("gelu_scale_shift_fp32", "BLOCK=256 ROWS=4 warps=4"),
    "swish_small_block": ("swish_residual_fp16", "BLOCK=512 warps=4"),
    "matmul_small_tiles": ("matmul_fp32", "BLOCK_M=32 BLOCK_N=64 BLOCK_K=16 warps=4 stages=2 GROUP_M=4"),
    "layernorm_welford_hints": (
        "layernorm_fp32",
        "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no evict=hints",
    ),
    "rmsnorm_hints": ("rmsnorm_fp16", "variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no evict=hints"),
    "softmax_rows_hints": ("softmax_bf16", "variant=one_pass BLOCK=auto warps=auto ROWS=2 persistent=yes evict=hints"),
    "gelu_rows_hints": ("gelu_scale_shift_fp32", "BLOCK=256 ROWS=4 warps=4 evict=hints"),
    "swish_hints": ("swish_residual_fp16", "BLOCK=512 warps=4 evict=hints"),
}
EXTRA_VARIANTS: dict[str, tuple[str, str | None]] = {
    "argmax_looped": (
        EXTRA.format(body="torch.argmax(x * g + self.bias, dim=-1)", dtype=FP32),
        "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no",
    ),
    "fp16_chain_into_fp32": (
        EXTRA.format(
            body="F.silu(x * g + self.bias) - torch.tanh(x).clamp(min=-0.5) + F.mish(x)", dtype="torch.float16"
        ),
        None,
    ),
    "argmax_middle_dimension": (
        EXTRA.format(body="torch.argmax(x * 3.0, dim=1, keepdim=True)", dtype=FP16).replace("(17, 30", "(3, 17, 30"),
        "BLOCK_R=2 BLOCK_I=16 warps=1",
    ),
    "softmax_regrouped_rows": (
        EXTRA.format(body="torch.softmax(x.view(-1, x.shape[-1]), dim=-1).view(x.shape) * x", dtype=FP32).replace(
            "(17, 30", "(3, 17, 30"
        ),
        None,
    ),
    "mean_first_dimension": (EXTRA.format(body="torch.relu(x - 0.5).mean(dim=0) * 2.0", dtype=FP32), None),
    "normalize_and_stats": (
        EXTRA.format(
            body="F.normalize(x, dim=-1) + torch.var(x, -1, keepdim=True) - x.amax(-1, True)", dtype="torch.float32"
        ),
        "variant=looped BLOCK=256 warps=auto ROWS=1 persistent=no",
    ),
}


def test_every_variant_matches_the_reference_in_the_interpreter(tmp_path: Path) -> None:
    args: list[str] = []
    for label, (name, tag) in VARIANTS.items():
        args += write(tmp_path, label, (bundled_dir() / f"{name}.py").read_text(), tag)
    for label, (reference, tag) in EXTRA_VARIANTS.items():
        args += write(tmp_path, label, reference, tag)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    command = [sys.executable, str(RUNNER), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    labels = [*VARIANTS, *EXTRA_VARIANTS]
    assert dict(zip(labels, json.loads(done.stdout), strict=True)) == dict.fromkeys(labels, "ok")
