"""The private channel: frames round-trip exactly, and anything forged or malformed is refused."""

from __future__ import annotations

import os
import time

import pytest
import torch

from openkernel.evaluate.channel import (
    Channel,
    ChannelClosed,
    ChannelError,
    ChannelTimeout,
    decode_tensors,
    encode_tensors,
)

SECRET = bytes(range(32))


def _pair(secret: bytes = SECRET) -> tuple[Channel, Channel]:
    r, w = os.pipe()
    return Channel(r, w, secret), Channel(r, w, secret)


def test_tensors_round_trip_bit_exact() -> None:
    tensors = [
        torch.randn(3, 5),
        torch.randn(7).to(torch.bfloat16),
        torch.randn(2, 2).half(),
        torch.arange(6, dtype=torch.int64).reshape(2, 3),
        torch.tensor([True, False]),
        torch.empty(0, 4),
        torch.randn(4, 6).t(),  # non-contiguous
        torch.tensor(float("nan")),
    ]
    sender, receiver = _pair()
    metas, parts = encode_tensors(tensors)
    sender.send({"kind": "t", "tensors": metas}, parts)
    frame = receiver.recv(time.monotonic() + 5)
    back = decode_tensors(frame.header["tensors"], frame.payload)
    assert frame.kind == "t"
    assert [(b.dtype, tuple(b.shape)) for b in back] == [(t.dtype, tuple(t.shape)) for t in tensors]
    assert all(torch.equal(a.contiguous().view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))
               for a, b in zip(tensors, back, strict=True))  # fmt: skip


def test_a_frame_made_with_another_secret_is_refused() -> None:
    r, w = os.pipe()
    forger = Channel(r, w, b"\x01" * 32)
    receiver = Channel(r, w, SECRET)
    forger.send({"kind": "done"})
    with pytest.raises(ChannelError, match="authentication"):
        receiver.recv(time.monotonic() + 5)


def test_garbage_on_the_pipe_is_refused() -> None:
    r, w = os.pipe()
    os.write(w, b'{"status": "correct", "speedup": 100.0}\n' + b"x" * 60)
    with pytest.raises(ChannelError, match="magic"):
        Channel(r, w, SECRET).recv(time.monotonic() + 5)


def test_closed_pipe_and_deadline() -> None:
    r, w = os.pipe()
    receiver = Channel(r, w, SECRET)
    with pytest.raises(ChannelTimeout):
        receiver.recv(time.monotonic() + 0.2)
    os.close(w)
    with pytest.raises(ChannelClosed):
        receiver.recv(time.monotonic() + 5)


@pytest.mark.parametrize(
    ("meta", "payload_len"),
    [
        ([{"dtype": "object", "shape": [1], "nbytes": 8}], 8),
        ([{"dtype": "float32", "shape": [3], "nbytes": 8}], 8),
        ([{"dtype": "float32", "shape": [-1], "nbytes": 4}], 4),
        ([{"dtype": "float32", "shape": [1], "nbytes": 4}], 12),
        ({"dtype": "float32"}, 0),
    ],
)
def test_tensor_descriptions_are_validated(meta: object, payload_len: int) -> None:
    with pytest.raises(ChannelError):
        decode_tensors(meta, bytearray(payload_len))
