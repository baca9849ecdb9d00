"""Values on the wire: plain Python data, tensors as raw bytes, handles for everything else.

The worker runs student code, so everything it sends back is validated here
(dtype allow-list, shape against byte count, depth) before a plain
``torch.Tensor`` is built from it. Nothing is ever unpickled.

Loaded by path inside the worker as well, so it imports nothing from the
``grader`` package; the framing lives in ``wire``.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .wire import ProtocolError

MAX_DEPTH = 32
# The product of a shape's sizes, a 0 counted as 1: an empty tensor still gets strides from the other sizes,
# and they must stay in torch's int64.
MAX_SPAN = 2**56

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


@dataclass(frozen=True)
class SeededGenerator:
    """Sent as a seed; arrives as a fresh ``torch.Generator`` seeded with it."""

    seed: int


@dataclass(frozen=True)
class TensorInfo:
    """A tensor whose data did not travel (not on the CPU, or an odd dtype)."""

    dtype: str
    shape: tuple[int, ...]
    device: str


# ---------------------------------------------------------------- values


def encode(obj: Any, blobs: list[bytes], to_handle: Callable[[Any], dict]) -> dict:
    """Turn a value into JSON plus blobs; anything that is not plain data becomes a handle."""
    kind = type(obj)
    if obj is None or kind in (bool, int, float, str):
        return {"t": "py", "v": obj}
    if kind is torch.Tensor:
        if obj.device.type != "cpu" or obj.dtype not in DTYPE_NAMES or obj.is_sparse:
            return {
                "t": "info",
                "dtype": str(obj.dtype).removeprefix("torch."),
                "shape": list(obj.shape),
                "device": str(obj.device),
            }
        data = obj.detach().contiguous()
        blobs.append(ctypes.string_at(data.data_ptr(), data.numel() * data.element_size()) if data.numel() else b"")
        return {"t": "tensor", "dtype": DTYPE_NAMES[obj.dtype], "shape": list(obj.shape), "blob": len(blobs) - 1}
    if kind in (list, tuple):
        return {"t": kind.__name__, "items": [encode(x, blobs, to_handle) for x in obj]}
    if kind is dict and all(type(k) is str for k in obj):
        return {"t": "dict", "items": {k: encode(v, blobs, to_handle) for k, v in obj.items()}}
    if kind is TensorInfo:
        return {"t": "info", "dtype": obj.dtype, "shape": list(obj.shape), "device": obj.device}
    if kind is SeededGenerator:
        return {"t": "generator", "seed": obj.seed}
    if kind in (torch.device, torch.dtype, torch.Size):
        return {"t": "py", "v": str(obj).removeprefix("torch.")}
    return to_handle(obj)


def decode(
    enc: Any,
    blobs: list[bytes],
    make_handle: Callable[[int, str], Any],
    depth: int = 0,
    make_info: Callable[[TensorInfo], Any] = lambda info: info,
) -> Any:
    """Rebuild a value sent by the other side, trusting nothing about it."""
    if depth > MAX_DEPTH or not isinstance(enc, dict):
        raise ProtocolError("malformed value")
    tag = enc.get("t")
    if tag == "py":
        return _decode_plain(enc)
    if tag == "tensor":
        return _decode_tensor(enc, blobs)
    if tag == "info":
        return make_info(TensorInfo(str(enc.get("dtype")), _shape(enc.get("shape")), str(enc.get("device"))))
    if tag in ("list", "tuple"):
        seq = [decode(x, blobs, make_handle, depth + 1, make_info) for x in _items(enc, list, "malformed sequence")]
        return seq if tag == "list" else tuple(seq)
    if tag == "dict":
        items = _items(enc, dict, "malformed mapping")
        return {str(k): decode(v, blobs, make_handle, depth + 1, make_info) for k, v in items.items()}
    # manual_seed takes any int64 or uint64; outside that range it raises ValueError, not ours to raise
    if tag == "generator" and type(enc.get("seed")) is int and -(2**63) <= enc["seed"] < 2**64:
        return torch.Generator().manual_seed(enc["seed"])
    if tag == "handle" and type(enc.get("id")) is int:
        return make_handle(enc["id"], str(enc.get("type")))
    raise ProtocolError(f"unknown value tag {tag!r}")


def _decode_plain(enc: dict) -> Any:
    """A plain value: None, a bool, an int, a float or a str, nothing else."""
    value = enc.get("v")
    if value is not None and type(value) not in (bool, int, float, str):
        raise ProtocolError("malformed plain value")
    return value


def _items(enc: dict, kind: type, malformed: str) -> Any:
    """A sequence's or a mapping's encoded items, which must be a ``kind`` (a list, a dict)."""
    items = enc.get("items")
    if not isinstance(items, kind):
        raise ProtocolError(malformed)
    return items


def _shape(shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(s) is int and s >= 0 for s in shape):
        raise ProtocolError("malformed tensor shape")
    if math.prod(max(s, 1) for s in shape) >= MAX_SPAN:
        raise ProtocolError("tensor shape too large")
    return tuple(shape)


def _decode_tensor(enc: dict, blobs: list[bytes]) -> torch.Tensor:
    name = enc.get("dtype")
    dtype = DTYPES.get(name) if type(name) is str else None
    shape = _shape(enc.get("shape"))
    index = enc.get("blob")
    if dtype is None or type(index) is not int or not 0 <= index < len(blobs):
        raise ProtocolError("malformed tensor")
    blob = blobs[index]
    numel = math.prod(shape)
    if numel * dtype.itemsize != len(blob):
        raise ProtocolError(f"tensor of shape {list(shape)} does not match its {len(blob)} data bytes")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape)


def meta_tensor(info: TensorInfo) -> torch.Tensor:
    """The worker's reading of a TensorInfo: a data-less tensor on the 'meta' device."""
    if info.device != "meta" or info.dtype not in DTYPES:
        raise ProtocolError("only meta tensors can be sent without data")
    return torch.empty(info.shape, dtype=DTYPES[info.dtype], device="meta")
