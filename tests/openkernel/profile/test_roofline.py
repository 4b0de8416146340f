"""Roofline numbers checked by hand: FLOPs and minimal bytes of bundled problems, and the bottleneck rules."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest
import torch

from openkernel.hardware import Ceilings, ComputeCeiling, ceilings, spec_by_name
from openkernel.problems import bundled_dir
from openkernel.profile import FlopCount, FlopRule, Roofline, WorkCount, analyse, count_flops, count_work, min_bytes
from openkernel.profile.flops import (
    RULE_ATTENTION,
    RULE_BIAS,
    RULE_ELEMENTWISE,
    RULE_FLOP_COUNTER,
    RULE_MOVEMENT,
    RULE_NORM,
    RULE_REDUCTION,
    RULE_SOFTMAX,
    RULE_TRANSCENDENTAL,
)

FP32, FP16 = 4, 2  # bytes per element


def _problem(name: str) -> ModuleType:
    """A bundled problem file, imported fresh, at its SMALL_SIZES."""
    spec = importlib.util.spec_from_file_location(f"roofline_test_{name}", bundled_dir() / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for constant, value in module.SMALL_SIZES.items():
        setattr(module, constant, value)
    return module


def _work(name: str) -> WorkCount:
    problem = _problem(name)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs())
    return count_work(model, problem.get_inputs())


def test_matmul_fp32() -> None:
    m, k, n = 67, 97, 83  # SMALL_SIZES
    assert _work("matmul_fp32") == WorkCount(
        FlopCount(2 * m * n * k, (FlopRule(RULE_FLOP_COUNTER, "aten.mm", 2 * m * n * k),), "float32"),
        (m * k + k * n + m * n) * FP32,  # A and B read, C written
    )


def test_softmax_fp32() -> None:
    rows, dim = 64, 781
    assert _work("softmax_fp32") == WorkCount(
        FlopCount(5 * rows * dim, (FlopRule(RULE_SOFTMAX, "aten._softmax", 5 * rows * dim),), "float32"),
        2 * rows * dim * FP32,  # x in, y out
    )


def test_layernorm_fp32_counts_weight_and_bias() -> None:
    rows, dim = 64, 781
    flops = (5 + 1 + 1) * rows * dim  # normalise, then multiply by weight and add bias
    assert _work("layernorm_fp32") == WorkCount(
        FlopCount(flops, (FlopRule(RULE_NORM, "aten.native_layer_norm", flops),), "float32"),
        (2 * rows * dim + 2 * dim) * FP32,  # x in, y out, weight and bias [dim]
    )


def test_linear_bias_gelu_fp16() -> None:
    batch, inf, outf = 67, 97, 83
    matmul = 2 * batch * inf * outf  # FlopCounterMode's addmm: the product only
    outputs = batch * outf  # the bias add and the GELU, one per output element each
    assert _work("linear_bias_gelu_fp16") == WorkCount(
        FlopCount(
            matmul + 2 * outputs,
            (
                FlopRule(RULE_MOVEMENT, "aten.t", 0),
                FlopRule(RULE_FLOP_COUNTER, "aten.addmm", matmul),
                FlopRule(RULE_BIAS, "aten.addmm", outputs),
                FlopRule(RULE_TRANSCENDENTAL, "aten.gelu", outputs),
            ),
            "float16",
        ),
        (batch * inf + outf * inf + outf + batch * outf) * FP16,  # x, W, b read; y written
    )


def test_conv2d_relu_fp32() -> None:
    n, cin, cout, h, w, k = 2, 3, 6, 11, 13, 3  # stride 1, padding 1: the output is h x w too
    conv = 2 * (n * h * w) * cout * (cin * k * k)  # FlopCounterMode's convolution: a MAC is 2 FLOPs
    outputs = n * cout * h * w
    assert _work("conv2d_relu_fp32") == WorkCount(
        FlopCount(
            conv + 2 * outputs,
            (
                FlopRule(RULE_FLOP_COUNTER, "aten.convolution", conv),
                FlopRule(RULE_BIAS, "aten.convolution", outputs),
                FlopRule(RULE_ELEMENTWISE, "aten.relu", outputs),
            ),
            "float32",
        ),
        (n * cin * h * w + cout * cin * k * k + cout + outputs) * FP32,  # x, weight, bias, y
    )


def test_rmsnorm_bf16_runs_its_math_in_fp32() -> None:
    rows, dim = 64, 781
    assert _work("rmsnorm_bf16") == WorkCount(
        FlopCount(
            4 * rows * dim + 2 * rows,
            (
                FlopRule(RULE_MOVEMENT, "aten._to_copy", 0),  # x.float(), weight.float(), .to(bf16)
                FlopRule(RULE_ELEMENTWISE, "aten.pow", rows * dim),
                FlopRule(RULE_REDUCTION, "aten.mean", rows * dim),
                FlopRule(RULE_ELEMENTWISE, "aten.add", rows),  # + eps, per row
                FlopRule(RULE_ELEMENTWISE, "aten.rsqrt", rows),
                FlopRule(RULE_ELEMENTWISE, "aten.mul", 2 * rows * dim),  # by rsqrt, by weight
            ),
            "float32",
        ),
        (2 * rows * dim + dim) * 2,  # bf16 x in, y out, weight
    )


def test_attention_fp16_on_the_cpu_kernel() -> None:
    b, heads, seq, d = 1, 2, 37, 16
    flops = 2 * (2 * b * heads * seq * seq * d)  # Q K^T and P V
    assert _work("attention_fp16") == WorkCount(
        FlopCount(
            flops, (FlopRule(RULE_ATTENTION, "aten._scaled_dot_product_flash_attention_for_cpu", flops),), "float16"
        ),
        4 * b * heads * seq * d * FP16,  # q, k, v, out
    )


def test_count_flops_alone_and_a_json_round_trip() -> None:
    problem = _problem("swish_residual_fp16")
    count = count_flops(problem.Model(), problem.get_inputs())
    assert FlopCount.from_json(count.to_json()) == count
    assert WorkCount.from_json(WorkCount(count, 7).to_json()) == WorkCount(count, 7)


def test_min_bytes_dedupes_storages_and_counts_real_bytes() -> None:
    x = torch.zeros(10, 8)
    packed = torch.zeros(3, 4, 5)  # q, k, v views into one tensor: three distinct regions
    q, k, v = packed.unbind(0)
    row = torch.zeros(8).expand(10, 8)  # stride 0: 8 real elements
    assert min_bytes([x, x], x[:5], []) == 10 * 8 * FP32  # one storage, counted once
    assert min_bytes([q, k], v, []) == 3 * 4 * 5 * FP32
    assert min_bytes([q], None, []) == 4 * 5 * FP32
    assert min_bytes([row], torch.zeros(0), [torch.zeros(3)]) == (8 + 3) * FP32


# ------------------------------------------------------------------------------------ analysis

CEILINGS = Ceilings(
    gpu="Test GPU",
    bandwidth_bytes_per_s=4e12,
    bandwidth_source="measured",
    compute=(
        ComputeCeiling("fp32", 50e12, "measured"),
        ComputeCeiling("tf32", 400e12, "datasheet"),
        ComputeCeiling("fp16", 800e12, "datasheet"),
        ComputeCeiling("bf16", 800e12, "measured"),
    ),
)


def _count(flops: int, dtype: str) -> FlopCount:
    return FlopCount(flops, (FlopRule(RULE_ELEMENTWISE, "aten.add", flops),), dtype)


def _split(roof: Roofline) -> tuple[dict[str, Any], list[str]]:
    data = roof.to_json()
    assert data.pop("flops_by_rule") == [r._asdict() for r in roof.flop_count.by_rule]
    return data, data.pop("evidence")


def test_memory_bound() -> None:
    # 8 GB at 4 TB/s = 2 ms; 1 GFLOP at 50 TFLOP/s = 0.02 ms. Timed at 2.5 ms: 3.2 TB/s, 80% of the copy rate.
    data, evidence = _split(analyse(_count(10**9, "float32"), 8 * 10**9, torch.float32, CEILINGS, 2.5))
    assert data == pytest.approx(
        {
            "flops": 10**9,
            "min_bytes": 8 * 10**9,
            "arithmetic_intensity": 0.125,
            "sol_time_ms": 2.0,
            "bottleneck": "memory_bound",
            "headroom": 1.25,
            "dtype": "float32",
            "compute_ceiling": "fp32",
            "peak_flops_per_s": 50e12,
            "peak_flops_source": "measured",
            "bandwidth_bytes_per_s": 4e12,
            "bandwidth_source": "measured",
            "compute_time_ms": 0.02,
            "memory_time_ms": 2.0,
            "bound_by": "memory",
            "measured_time_ms": 2.5,
            "achieved_bytes_per_s": 3.2e12,
            "achieved_flops_per_s": 4e11,
            "pct_of_peak": 80.0,
        }
    )
    assert evidence == [
        "1,000,000,000 FLOP over 8,000,000,000 bytes: arithmetic intensity 0.125 FLOP/byte against a ridge "
        "point of 12.5, so the memory term sets the speed-of-light time (2 ms)",
        "achieved 3.2 TB/s = 80% of the 4 TB/s measured copy bandwidth",
        "achieved 400 GFLOP/s = 1% of the 50 TFLOP/s measured fp32 matmul rate",
        "80% of the memory ceiling is at or above the 60% threshold",
    ]


def test_compute_bound_takes_the_counts_dtype() -> None:
    # 8 TFLOP at 800 TFLOP/s = 10 ms; 1 GB at 4 TB/s = 0.25 ms. Timed at 12.5 ms: 640 TFLOP/s, 80%.
    roof = analyse(_count(8 * 10**12, "bfloat16"), 10**9, None, CEILINGS, 12.5)
    data, evidence = _split(roof)
    assert (data["dtype"], data["compute_ceiling"], data["bound_by"], data["bottleneck"]) == (
        "bfloat16",
        "bf16",
        "compute",
        "compute_bound",
    )
    assert (data["sol_time_ms"], data["headroom"], data["pct_of_peak"]) == pytest.approx((10.0, 1.25, 80.0))
    assert evidence == [
        "8,000,000,000,000 FLOP over 1,000,000,000 bytes: arithmetic intensity 8e+03 FLOP/byte against a ridge "
        "point of 200, so the compute term sets the speed-of-light time (10 ms)",
        "achieved 80 GB/s = 2% of the 4 TB/s measured copy bandwidth",
        "achieved 640 TFLOP/s = 80% of the 800 TFLOP/s measured bf16 matmul rate",
        "80% of the compute ceiling is at or above the 60% threshold",
    ]


def test_latency_bound_by_a_short_call() -> None:
    # 4 MB at 4 TB/s = 1 us; timed at 10 us: 10% of the bandwidth, and under the 20 us threshold.
    roof = analyse(_count(10**6, "float16"), 4 * 10**6, torch.float16, CEILINGS, 0.010)
    assert roof.bottleneck == "latency_bound"
    assert roof.headroom == pytest.approx(10.0)
    assert roof.evidence == (
        "1,000,000 FLOP over 4,000,000 bytes: arithmetic intensity 0.25 FLOP/byte against a ridge point of 200, "
        "so the memory term sets the speed-of-light time (0.001 ms)",
        "achieved 400 GB/s = 10% of the 4 TB/s measured copy bandwidth",
        "achieved 100 GFLOP/s = 0% of the 800 TFLOP/s datasheet fp16 rate",
        "neither ceiling reaches 60%, and 10 us is under the 20 us latency threshold: launch and sync costs "
        "are a large share",
    )


def test_latency_bound_by_work_smaller_than_a_launch() -> None:
    # Speed of light 1 us, under the 5 us launch overhead, though the call took 100 us (many tiny launches).
    roof = analyse(_count(10**6, "float16"), 4 * 10**6, torch.float16, CEILINGS, 0.1)
    assert (roof.bottleneck, roof.evidence[-1]) == (
        "latency_bound",
        "neither ceiling reaches 60%, and the speed-of-light time (1 us) is under one launch overhead (5 us): "
        "fixed costs, not throughput, set the time",
    )


def test_under_utilised() -> None:
    # The memory-bound case timed at 10 ms: 20% of the bandwidth, and long enough to have done better.
    roof = analyse(_count(10**9, "float32"), 8 * 10**9, torch.float32, CEILINGS, 10.0)
    assert (roof.bottleneck, roof.headroom, roof.pct_of_peak) == ("under_utilised", 5.0, 20.0)
    assert roof.evidence[1:] == (
        "achieved 800 GB/s = 20% of the 4 TB/s measured copy bandwidth",
        "achieved 100 GFLOP/s = 0% of the 50 TFLOP/s measured fp32 matmul rate",
        "neither ceiling reaches 60%, though at 10 ms the call is long enough to: the GPU is under-utilised",
    )


def test_without_a_gpu_the_analytic_part_stands_and_measured_parts_are_null() -> None:
    # softmax_fp32 at its full size against the H200's datasheet: 16384 x 4096 fp32 read and written.
    rows, dim = 16384, 4096
    count = FlopCount(5 * rows * dim, (FlopRule(RULE_SOFTMAX, "aten._softmax", 5 * rows * dim),), "float32")
    roof = analyse(count, 2 * rows * dim * FP32, None, ceilings(spec_by_name("H200"), None), None)
    data, evidence = _split(roof)
    assert data == pytest.approx(
        {
            "flops": 5 * rows * dim,
            "min_bytes": 2 * rows * dim * FP32,
            "arithmetic_intensity": 5 / 8,
            "sol_time_ms": 2 * rows * dim * FP32 / 4.8e12 * 1e3,  # 0.112 ms
            "bottleneck": None,
            "headroom": None,
            "dtype": "float32",
            "compute_ceiling": "fp32",
            "peak_flops_per_s": 67e12,
            "peak_flops_source": "datasheet",
            "bandwidth_bytes_per_s": 4.8e12,
            "bandwidth_source": "datasheet",
            "compute_time_ms": 5 * rows * dim / 67e12 * 1e3,
            "memory_time_ms": 2 * rows * dim * FP32 / 4.8e12 * 1e3,
            "bound_by": "memory",
            "measured_time_ms": None,
            "achieved_bytes_per_s": None,
            "achieved_flops_per_s": None,
            "pct_of_peak": None,
        }
    )
    assert evidence == [
        "335,544,320 FLOP over 536,870,912 bytes: arithmetic intensity 0.625 FLOP/byte against a ridge point "
        "of 14, so the memory term sets the speed-of-light time (0.1118 ms)"
    ]


def test_a_counted_problem_analyses_end_to_end() -> None:
    work = _work("softmax_fp32")
    roof = analyse(work.flop_count, work.min_bytes, None, ceilings(spec_by_name("H200"), None), None)
    assert (roof.flops, roof.min_bytes, roof.bound_by, roof.bottleneck) == (
        5 * 64 * 781,
        2 * 64 * 781 * FP32,
        "memory",
        None,
    )
