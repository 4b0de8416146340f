"""The private channel between the trusted parent and a worker: authenticated frames on a pipe.

Why not stdout: a candidate can print anything, so stdout is only a bounded log. Why not pickle:
unpickling what an untrusted process sent runs its code in the parent. A frame is a small JSON
header plus raw tensor bytes. The header (which carries the payload's length) is keyed-BLAKE2b
authenticated with a per-run secret that the parent writes first on the pipe (never in argv or
the environment). The payload is not: bytes injected into it can only corrupt an output (which
then fails the comparison) or desynchronise the stream (a malformed frame), never forge a pass,
and hashing gigabytes of outputs would cost seconds per evaluation. A worker that dies, exits early or
sends a malformed or unauthenticated frame has failed; the parent decides what that means.

Frame layout (all integers big-endian)::

    b"OKF1" | header_len u32 | payload_len u64 | mac 32 bytes | header (JSON, UTF-8) | payload
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "SECRET_BYTES",
    "Channel",
    "ChannelClosed",
    "ChannelError",
    "ChannelTimeout",
    "Frame",
    "decode_tensors",
    "encode_tensors",
]

SECRET_BYTES = 32
_MAGIC = b"OKF1"
_PREFIX = struct.Struct(">4sIQ32s")
MAX_HEADER_BYTES = 4 * 1024 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024**3
_CHUNK = 1 << 20

# Only plain numeric dtypes travel; anything else in a header is a malformed frame.
_DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
    )
}


class ChannelError(Exception):
    """The other side sent something that is not a valid, authenticated frame."""


class ChannelClosed(ChannelError):
    """The other side closed the pipe (it exited or died) before a whole frame arrived."""


class ChannelTimeout(ChannelError):
    """No whole frame arrived before the deadline."""


@dataclass(frozen=True)
class Frame:
    header: dict[str, Any]
    payload: bytearray

    @property
    def kind(self) -> str:
        kind = self.header.get("kind")
        return kind if isinstance(kind, str) else ""


class Channel:
    """One direction each way: ``rfd`` to read frames, ``wfd`` to write them."""

    def __init__(self, rfd: int, wfd: int, secret: bytes) -> None:
        if len(secret) != SECRET_BYTES:
            raise ValueError("channel secret must be 32 bytes")
        self._rfd = rfd
        self._wfd = wfd
        self._secret = secret

    @staticmethod
    def read_secret(rfd: int, deadline: float | None = None) -> bytes:
        return bytes(_read_exact(rfd, SECRET_BYTES, deadline))

    def send(self, header: dict[str, Any], payload: Sequence[memoryview] = ()) -> None:
        """Send one frame; ``payload`` is a list of byte buffers sent back to back (no copy)."""
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        total = sum(p.nbytes for p in payload)
        mac = self._mac(head, total)
        _write_all(self._wfd, memoryview(_PREFIX.pack(_MAGIC, len(head), total, mac) + head))
        for part in payload:
            _write_all(self._wfd, part)

    def recv(self, deadline: float | None = None) -> Frame:
        """Read one frame; ``deadline`` is a ``time.monotonic()`` value (None: wait forever)."""
        magic, head_len, payload_len, mac = _PREFIX.unpack(_read_exact(self._rfd, _PREFIX.size, deadline))
        if magic != _MAGIC:
            raise ChannelError("frame does not start with the channel's magic bytes")
        if head_len > MAX_HEADER_BYTES or payload_len > MAX_PAYLOAD_BYTES:
            raise ChannelError(f"frame too large (header {head_len} B, payload {payload_len} B)")
        head = _read_exact(self._rfd, head_len, deadline)
        payload = _read_exact(self._rfd, payload_len, deadline)
        if not hmac.compare_digest(mac, self._mac(head, payload_len)):
            raise ChannelError("frame failed authentication (not sent by the harness)")
        try:
            header = json.loads(head)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ChannelError("frame header is not JSON") from None
        if not isinstance(header, dict):
            raise ChannelError("frame header is not a JSON object")
        return Frame(header=header, payload=payload)

    def _mac(self, head: bytes | bytearray, payload_len: int) -> bytes:
        h = hashlib.blake2b(key=self._secret, digest_size=32)
        h.update(len(head).to_bytes(4, "big"))
        h.update(payload_len.to_bytes(8, "big"))
        h.update(head)
        return h.digest()


def encode_tensors(tensors: Sequence[torch.Tensor]) -> tuple[list[dict[str, Any]], list[memoryview]]:
    """Describe ``tensors`` and expose their bytes (CPU, contiguous) for :meth:`Channel.send`."""
    metas: list[dict[str, Any]] = []
    parts: list[memoryview] = []
    for t in tensors:
        c = t.detach().to("cpu").contiguous()
        name = str(c.dtype).removeprefix("torch.")
        if name not in _DTYPES:
            raise TypeError(f"dtype {c.dtype} cannot travel on the channel")
        data = memoryview(c.reshape(-1).view(torch.uint8).numpy().data) if c.numel() else memoryview(b"")
        metas.append({"dtype": name, "shape": list(c.shape), "nbytes": data.nbytes})
        parts.append(data)
    return metas, parts


def decode_tensors(metas: Any, payload: bytearray) -> list[torch.Tensor]:
    """Inverse of :func:`encode_tensors`, validating every field (the sender is not trusted)."""
    if not isinstance(metas, list):
        raise ChannelError("tensor list missing from frame")
    out: list[torch.Tensor] = []
    offset = 0
    view = memoryview(payload)
    for meta in metas:
        if not isinstance(meta, dict):
            raise ChannelError("tensor description is not an object")
        dtype = _DTYPES.get(meta.get("dtype", ""))
        shape = meta.get("shape")
        nbytes = meta.get("nbytes")
        if dtype is None or not isinstance(shape, list) or not isinstance(nbytes, int):
            raise ChannelError("tensor description has a bad dtype, shape or size")
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ChannelError("tensor shape must be non-negative integers")
        numel = 1
        for s in shape:
            numel *= s
        itemsize = torch.empty((), dtype=dtype).element_size()
        if numel * itemsize != nbytes or offset + nbytes > len(payload):
            raise ChannelError("tensor size does not match its description")
        if nbytes:
            flat = torch.frombuffer(view[offset : offset + nbytes], dtype=torch.uint8)  # owns no copy
            out.append(flat.view(dtype).reshape(shape))
        else:
            out.append(torch.empty(shape, dtype=dtype))
        offset += nbytes
    if offset != len(payload):
        raise ChannelError("frame payload has bytes no tensor describes")
    return out


def _read_exact(fd: int, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            # Past the deadline, data that is already waiting is still read (select with 0).
            remaining = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise ChannelTimeout("no complete frame before the deadline")
        try:
            k = os.readv(fd, [view[got : got + min(_CHUNK * 64, n - got)]])
        except InterruptedError:
            continue
        if k == 0:
            raise ChannelClosed("the other side closed the channel")
        got += k
    return buf


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            k = os.write(fd, view[: _CHUNK * 16])
        except InterruptedError:
            continue
        view = view[k:]
