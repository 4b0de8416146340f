"""The GPU table, name lookup, detection, the calibration cache, and which ceilings win."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from openkernel import ConfigError
from openkernel.hardware import (
    Calibration,
    Ceilings,
    ComputeCeiling,
    GpuSpec,
    calibrate,
    calibration_for,
    ceilings,
    detect,
    find_spec,
    list_calibrations,
    load_calibration,
    peak_flops_per_s,
    save_calibration,
    spec_by_name,
    specs,
)
from tests.conftest import HAS_GPU, needs_gpu

GIB = 2**30
MIB = 2**20

H200 = GpuSpec(
    name="H200",
    hbm_bytes_per_s=4.8e12,
    l2_bytes=60 * MIB,  # 62,914,560 as the device reports it
    sm_count=132,
    hbm_bytes=141 * GIB,
    fp32_flops_per_s=67e12,
    tf32_dense_flops_per_s=494.5e12,
    fp16_dense_flops_per_s=989.5e12,
    bf16_dense_flops_per_s=989.5e12,
    fp8_dense_flops_per_s=1979e12,
    compute_capability=(9, 0),
)
A100_80GB = GpuSpec(
    name="A100 80GB",
    hbm_bytes_per_s=2.039e12,
    l2_bytes=40 * MIB,
    sm_count=108,
    hbm_bytes=80 * GIB,
    fp32_flops_per_s=19.5e12,
    tf32_dense_flops_per_s=156e12,
    fp16_dense_flops_per_s=312e12,
    bf16_dense_flops_per_s=312e12,
    fp8_dense_flops_per_s=None,
    compute_capability=(8, 0),
)
CALIBRATION = Calibration(
    gpu_name="NVIDIA H200",
    date="2026-11-30T09:00:00+00:00",
    copy_bytes_per_s=4.25e12,
    matmul_flops_per_s={"fp32": 51e12, "bf16": 790e12},
    torch_version="2.11.0+cu130",
    cuda_version="13.0",
    driver_version=None,
)


def test_the_table_has_the_nine_parts_in_order() -> None:
    assert [spec.name for spec in specs()] == [
        "A100 40GB",
        "A100 80GB",
        "H100 SXM",
        "H100 PCIe",
        "H200",
        "L40S",
        "L4",
        "B200",
        "RTX 4090",
    ]


def test_h200_and_a100_80gb_rows_are_whole() -> None:
    assert spec_by_name("H200") == H200
    assert spec_by_name("A100 80GB") == A100_80GB


def test_every_row_is_complete_and_only_ampere_lacks_fp8() -> None:
    for spec in specs():
        rates = (spec.hbm_bytes_per_s, spec.fp32_flops_per_s, spec.tf32_dense_flops_per_s, spec.bf16_dense_flops_per_s)
        assert all(rate > 0 for rate in rates), spec.name
        assert spec.sm_count > 0 and spec.l2_bytes > 0 and spec.hbm_bytes > 0, spec.name
    assert [spec.name for spec in specs() if spec.fp8_dense_flops_per_s is None] == ["A100 40GB", "A100 80GB"]


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("cuda:0 (NVIDIA H200)", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA L40", None),  # not an L4
        ("Tesla T4", None),
    ],
)
def test_find_spec_reads_device_names(label: str, name: str | None) -> None:
    spec = find_spec(label)
    assert (None if spec is None else spec.name) == name


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("H200", "H200"),
        ("h200", "H200"),
        ("h100-sxm", "H100 SXM"),
        ("H100", "H100 SXM"),
        ("h100 pcie", "H100 PCIe"),
        ("a100-80gb", "A100 80GB"),
        ("A100_40GB", "A100 40GB"),
        ("l40s", "L40S"),
        ("4090", "RTX 4090"),
        ("NVIDIA H200", "H200"),
    ],
)
def test_spec_by_name_accepts_what_users_type(typed: str, name: str) -> None:
    assert spec_by_name(typed).name == name


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        spec_by_name("V100")
    assert str(info.value) == (
        "unknown GPU 'V100': use one of A100 40GB, A100 80GB, H100 SXM, H100 PCIe, H200, L40S, L4, B200, RTX 4090"
    )
    assert isinstance(info.value, ConfigError)  # the CLI prints it as one line


def test_peak_flops_per_dtype() -> None:
    assert [
        peak_flops_per_s(H200, torch.float32, tensor_cores=False),
        peak_flops_per_s(H200, torch.float32, tensor_cores=True),
        peak_flops_per_s(H200, torch.float16, tensor_cores=True),
        peak_flops_per_s(H200, torch.bfloat16, tensor_cores=True),
        peak_flops_per_s(H200, torch.float8_e4m3fn, tensor_cores=True),
        peak_flops_per_s(H200, torch.bfloat16, tensor_cores=False),
        peak_flops_per_s(A100_80GB, torch.float8_e4m3fn, tensor_cores=True),  # no FP8: the fp16 rate
    ] == [67e12, 494.5e12, 989.5e12, 989.5e12, 1979e12, 67e12, 312e12]


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU answer")
def test_detect_is_none_without_a_gpu() -> None:
    assert detect() is None


@needs_gpu
def test_detect_reads_the_device() -> None:
    gpu = detect()
    assert gpu is not None
    props = torch.cuda.get_device_properties(0)
    assert (gpu.name, gpu.sm_count, gpu.l2_bytes) == (props.name, props.multi_processor_count, props.L2_cache_size)
    if gpu.spec is not None:
        assert (gpu.spec.sm_count, gpu.spec.l2_bytes) == (gpu.sm_count, gpu.l2_bytes)


def test_calibration_round_trip(tmp_path: Path) -> None:
    path = save_calibration(CALIBRATION, tmp_path)
    assert path == tmp_path / "calibration" / "nvidia-h200.json"
    assert load_calibration("NVIDIA H200", tmp_path) == CALIBRATION
    assert list_calibrations(tmp_path) == (CALIBRATION,)
    assert load_calibration("NVIDIA L4", tmp_path) is None
    assert list_calibrations(tmp_path / "empty") == ()


def test_calibrations_are_found_by_evaluator_label_and_by_part(tmp_path: Path) -> None:
    save_calibration(CALIBRATION, tmp_path)
    assert load_calibration("cuda:0 (NVIDIA H200)", tmp_path) == CALIBRATION
    assert calibration_for(H200, tmp_path) == CALIBRATION  # e.g. --hardware H200 on a CPU machine
    assert calibration_for(A100_80GB, tmp_path) is None


def test_a_corrupt_calibration_says_how_to_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "calibration" / "nvidia-h200.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="delete it and calibrate again"):
        load_calibration("NVIDIA H200", tmp_path)
    path.write_text('{"gpu_name": "NVIDIA H200"}')
    with pytest.raises(
        ConfigError, match=r"nvidia-h200.json is not a readable calibration \(no 'matmul_flops_per_s' field\)"
    ):
        load_calibration("NVIDIA H200", tmp_path)


def test_ceilings_prefer_measured_values() -> None:
    assert ceilings(H200, CALIBRATION) == Ceilings(
        gpu="H200",
        bandwidth_bytes_per_s=4.25e12,
        bandwidth_source="measured",
        compute=(
            ComputeCeiling("fp32", 51e12, "measured"),
            ComputeCeiling("tf32", 494.5e12, "datasheet"),
            ComputeCeiling("fp16", 989.5e12, "datasheet"),
            ComputeCeiling("bf16", 790e12, "measured"),
            ComputeCeiling("fp8", 1979e12, "datasheet"),
        ),
    )


def test_ceilings_without_a_calibration_are_the_datasheet() -> None:
    found = ceilings(A100_80GB, None)
    assert found == Ceilings(
        gpu="A100 80GB",
        bandwidth_bytes_per_s=2.039e12,
        bandwidth_source="datasheet",
        compute=(
            ComputeCeiling("fp32", 19.5e12, "datasheet"),
            ComputeCeiling("tf32", 156e12, "datasheet"),
            ComputeCeiling("fp16", 312e12, "datasheet"),
            ComputeCeiling("bf16", 312e12, "datasheet"),
        ),
    )
    assert found.compute_for(torch.float8_e5m2, tensor_cores=True) == ComputeCeiling("fp16", 312e12, "datasheet")
    assert found.compute_for(torch.float32, tensor_cores=False) == ComputeCeiling("fp32", 19.5e12, "datasheet")


@needs_gpu
def test_calibrate_measures_this_gpu() -> None:
    cal = calibrate(copy_bytes=256 * MIB, matmul_size=2048, repeats=3)
    assert cal.gpu_name == torch.cuda.get_device_name(0)
    assert cal.copy_bytes_per_s > 1e10
    assert set(cal.matmul_flops_per_s) == {"fp32", "tf32", "fp16", "bf16"}
    assert torch.backends.cuda.matmul.allow_tf32 is False  # restored
