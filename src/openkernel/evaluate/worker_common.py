"""What both worker roles share: device setup, and sending outputs to the parent.

Imported by the roles after ``harness`` (which captures the functions it relies on first).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from openkernel.evaluate.channel import Channel, encode_tensors

__all__ = [
    "StageError",
    "describe",
    "device_label",
    "input_bytes",
    "outputs_of",
    "send_outputs",
    "setup_device",
    "snapshot_outputs",
]


class StageError(Exception):
    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(stage)
        self.stage = stage
        self.exc = exc


def setup_device(name: str) -> torch.device:
    device = torch.device(name)
    # The problem's precision, explicitly: no silent TF32 for fp32 matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    return device


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index or 0} ({torch.cuda.get_device_name(device)})"
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    return "cpu (Triton interpreter)" if interp else "cpu"


def outputs_of(value: Any) -> tuple[str, list[Any]]:
    """Normalise a forward's return value: ("tensor", [t]) or ("tuple", [..]) or ("other", [])."""
    if isinstance(value, tuple | list):
        return "tuple", list(value)
    return ("tensor", [value]) if isinstance(value, torch.Tensor) else ("other", [])


def describe(values: list[Any]) -> list[dict[str, Any]]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(
                {
                    "type": f"{type(v).__module__}.{type(v).__qualname__}",
                    "dtype": str(v.dtype).removeprefix("torch."),
                    "shape": list(v.shape),
                    "device": str(v.device),
                }
            )
        else:
            out.append({"type": f"{type(v).__module__}.{type(v).__qualname__}"})
    return out


def send_outputs(ch: Channel, header: dict[str, Any], value: Any) -> None:
    structure, values = outputs_of(value)
    described = describe(values)
    plain = [v for v in values if type(v) is torch.Tensor]  # exact type: a subclass does not travel
    sendable = len(plain) == len(values) and structure != "other"
    metas, parts = encode_tensors(plain) if sendable else ([], [])
    ch.send(
        {**header, "structure": structure, "outputs": described, "tensors": metas, "sendable": sendable},
        parts,
    )


def snapshot_outputs(value: Any) -> Any:
    """A copy of a forward's plain-tensor outputs, safe from later calls that reuse their memory."""
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor:
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(v.detach().clone() if type(v) is torch.Tensor else v for v in value)
    return value


def input_bytes(inputs: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))
