"""``kernel-code hardware``: the table, the detected GPU (none here), and the cached calibrations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kernel_code import hardware_cmd
from openkernel.hardware import Calibration, save_calibration
from tests.conftest import HAS_GPU

pytestmark = pytest.mark.skipif(HAS_GPU, reason="checks the output of a machine without a GPU")

CALIBRATION = Calibration(
    gpu_name="NVIDIA H200",
    date="2026-11-30T09:00:00+00:00",
    copy_bytes_per_s=4.25e12,
    matmul_flops_per_s={"fp32": 51e12, "tf32": 380e12, "fp16": 760e12, "bf16": 790e12},
    torch_version="2.11.0+cu130",
    cuda_version="13.0",
    driver_version="580.95.05",
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kernel-code")
    hardware_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["hardware", *argv])


def test_json_lists_the_table_and_the_cached_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_calibration(CALIBRATION, tmp_path)
    assert hardware_cmd.run(_args("--json", "--cache-dir", str(tmp_path))) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    payload = json.loads(out)
    assert [row["name"] for row in payload["table"]] == [
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
    assert payload["table"][4] == {
        "name": "H200",
        "hbm_bytes_per_s": 4.8e12,
        "l2_bytes": 62_914_560,
        "sm_count": 132,
        "hbm_bytes": 141 * 2**30,
        "fp32_flops_per_s": 67e12,
        "tf32_dense_flops_per_s": 494.5e12,
        "fp16_dense_flops_per_s": 989.5e12,
        "bf16_dense_flops_per_s": 989.5e12,
        "fp8_dense_flops_per_s": 1979e12,
        "compute_capability": [9, 0],
    }
    assert {key: payload[key] for key in ("detected", "calibrations", "ceilings")} == {
        "detected": None,
        "calibrations": [
            {
                "gpu_name": "NVIDIA H200",
                "date": "2026-11-30T09:00:00+00:00",
                "copy_bytes_per_s": 4.25e12,
                "matmul_flops_per_s": {"fp32": 51e12, "tf32": 380e12, "fp16": 760e12, "bf16": 790e12},
                "torch_version": "2.11.0+cu130",
                "cuda_version": "13.0",
                "driver_version": "580.95.05",
            }
        ],
        "ceilings": None,
    }


def test_text_says_no_gpu_and_no_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hardware_cmd.run(_args("--cache-dir", str(tmp_path))) == 0
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    rows = [line.split() for line in lines]
    assert ["GPU", "HBM", "TB/s", "FP32", "TF32", "FP16", "BF16", "FP8", "L2", "MiB", "SMs", "GiB", "sm"] in rows
    assert ["H200", "4.8", "67", "494.5", "989.5", "989.5", "1979", "60", "132", "141", "90"] in rows
    assert ["A100", "80GB", "2.039", "19.5", "156", "312", "312", "—", "40", "108", "80", "80"] in rows
    assert lines[-2:] == [
        "no GPU detected: the roofline uses --hardware, measured parts are null",
        "no calibration cached: run kernel-code hardware --calibrate on the GPU",
    ]


def test_calibrate_needs_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hardware_cmd.run(_args("--calibrate", "--cache-dir", str(tmp_path))) == 2
    assert capsys.readouterr().err == "kernel-code: error: --calibrate needs a CUDA GPU, and none was detected\n"
