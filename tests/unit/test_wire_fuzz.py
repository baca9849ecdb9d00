"""Fuzz the grading process's reading of what a worker sends: framing (``wire``) and values (``protocol``).

A worker runs student code, so every byte it sends is hostile. The contract checked here:
reading either yields a well-formed message / value, or fails with an exception the client
turns into a graded failure (``WorkerCrash``), and never hangs. Precisely:

* malformed content (bad length prefix, bad JSON, bad blob list, bad value or tensor) raises
  ``ProtocolError``, the one documented error type ("the worker sent back malformed data");
* a frame cut short raises ``EOFError`` when the worker closed the socket ("the worker died")
  and ``TimeoutError`` when it just stops sending ("no answer within ...").

Everything goes through real sockets (``socket.socketpair``) with a deadline, and each read runs
in a thread joined with a timeout, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
import types
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from grader.sandbox import client
from grader.sandbox.common import protocol, wire

ProtocolError = wire.ProtocolError

FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SLOW_FUZZ = settings(FUZZ, max_examples=25)  # each example waits out a short deadline
CLIENT_FUZZ = settings(FUZZ, max_examples=60)  # each example is a whole request
HANG_SECONDS = 5.0  # far more than any read here needs; a read still going then has hung
# "At once": under the wait a read that waits for more gets (HANG_SECONDS / 2), with room for a busy machine
# (a shared CI machine at a load of 10 once took 1.5 s for an oversized prefix).
PROMPT_SECONDS = 2.0
INT64 = 2**63


# ---------------------------------------------------------------- running a read


def _in_thread(fn, *args: Any) -> Any:
    """``fn(*args)``'s result, re-raising its exception; fail the test if it runs past HANG_SECONDS."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} hung for over {HANG_SECONDS} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _send_quietly(sock: socket.socket, data: bytes, close: bool) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # the reader gave up early and closed its end: fine
    if close:
        sock.close()


def _read(data: bytes, close: bool = True, wait: float = HANG_SECONDS / 2, deadline: bool = True):
    """What ``wire.recv`` makes of ``data`` sent by a worker that then closes its end (or keeps it open).

    With ``deadline`` the read gets one deadline ``wait`` s away (as ``Worker.request`` does);
    without, only a socket timeout of ``wait`` s (as ``ForkServer.hello`` does).
    """
    ours, theirs = socket.socketpair()
    sender = threading.Thread(target=_send_quietly, args=(theirs, data, close), daemon=True)
    sender.start()
    try:
        ours.settimeout(wait)
        return _in_thread(wire.recv, ours, time.monotonic() + wait if deadline else None)
    finally:
        ours.close()
        sender.join(HANG_SECONDS)
        theirs.close()


def _frame(header_bytes: bytes) -> bytes:
    return struct.pack("!I", len(header_bytes)) + header_bytes


def _message(header: dict, blobs: list[bytes]) -> bytes:
    """The bytes ``wire.send`` puts on a socket for this message."""
    sent = bytearray()
    wire.send(types.SimpleNamespace(sendall=sent.extend), header, blobs)
    return bytes(sent)


def _check_well_formed(message: tuple) -> None:
    header, blobs = message
    assert isinstance(header, dict)
    sizes = header["blobs"]
    assert isinstance(sizes, list) and all(type(s) is int and s >= 0 for s in sizes)
    assert [len(b) for b in blobs] == sizes and all(type(b) is bytes for b in blobs)


# ---------------------------------------------------------------- strategies

BIG_INTS = st.sampled_from([2**31, 2**32, INT64 - 1, INT64, 2**64 - 1, 2**64, -INT64, -INT64 - 1, 10**30, -1])
json_leaves = st.none() | st.booleans() | st.integers() | BIG_INTS | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)
headers = st.dictionaries(st.text(max_size=6).filter(lambda k: k != "blobs"), json_values, max_size=5)
blob_lists = st.lists(st.binary(max_size=64), max_size=4)
dtype_names = st.sampled_from(sorted(protocol.DTYPES))
small_shapes = st.lists(st.integers(0, 4), max_size=4)
odd_shapes = (
    st.lists(st.integers(0, 4) | BIG_INTS | st.integers(), max_size=18)
    | st.lists(st.sampled_from([0, 1, 2**31, 2**40, INT64 - 1, INT64]), max_size=4)
    | json_values
)


@st.composite
def tensor_values(draw) -> tuple[dict, list[bytes]]:
    """A tensor's encoding and its blobs: often right, often off in dtype, shape, index or byte count."""
    name = draw(dtype_names)
    shape = draw(small_shapes)
    size = math.prod(shape) * protocol.DTYPES[name].itemsize
    size = max(0, size + draw(st.sampled_from([0, 0, 0, -1, 1, 3, -size])))
    blobs = draw(st.lists(st.binary(max_size=8), max_size=2))
    index = len(blobs)
    blobs.append(draw(st.binary(min_size=size, max_size=size)))
    enc = {
        "t": "tensor",
        "dtype": draw(st.just(name) | st.sampled_from(["float", "complex64", "torch.float32"]) | json_values),
        "shape": draw(st.just(shape) | odd_shapes),
        "blob": draw(st.just(index) | st.integers(-2, index + 2) | json_values),
    }
    for key in draw(st.sets(st.sampled_from(sorted(enc)), max_size=1)):
        del enc[key]
    return enc, blobs


leaf_encodings = st.one_of(  # leaves of a value, its blob 0 empty
    st.fixed_dictionaries({"t": st.just("py"), "v": json_values}),
    st.fixed_dictionaries(
        {
            "t": st.just("tensor"),
            "dtype": dtype_names | json_values,
            "shape": small_shapes | odd_shapes,
            "blob": st.integers(-1, 6) | json_values,
        }
    ),
    st.fixed_dictionaries(
        {
            "t": st.just("tensor"),
            "dtype": dtype_names,
            "blob": st.just(0),
            "shape": st.lists(st.sampled_from([0, 1, 5, 2**31, 2**40, INT64 - 1, INT64]), min_size=1, max_size=4),
        }
    ),  # no elements, but odd sizes
    st.fixed_dictionaries(
        {"t": st.just("info"), "dtype": json_values, "shape": small_shapes | odd_shapes, "device": json_values}
    ),
    st.fixed_dictionaries({"t": st.just("generator"), "seed": st.integers(-INT64, 2**64 - 1) | BIG_INTS | json_values}),
    st.fixed_dictionaries({"t": st.just("handle"), "id": st.integers() | json_values, "type": json_values}),
    st.dictionaries(
        st.sampled_from(["t", "v", "items", "dtype", "shape", "blob", "seed", "id"]), json_values, max_size=4
    ),
    json_values,
)
value_encodings = st.recursive(
    leaf_encodings,
    lambda inner: (
        st.fixed_dictionaries(
            {"t": st.sampled_from(["list", "tuple"]), "items": st.lists(inner, max_size=4) | json_values}
        )
        | st.fixed_dictionaries(
            {"t": st.just("dict"), "items": st.dictionaries(st.text(max_size=4), inner, max_size=4) | json_values}
        )
    ),
    max_leaves=10,
)


@st.composite
def encodings(draw) -> tuple[Any, list[bytes]]:
    """A value as a worker might send it (well-formed or not), with blobs."""
    blobs = [b"", *draw(blob_lists)]  # an empty blob first, for tensors with no elements
    value = draw(value_encodings)
    tensors = draw(st.lists(tensor_values(), max_size=2))
    for enc, extra in tensors:  # renumber each tensor's blob index to where its blobs now sit
        if type(enc.get("blob")) is int:
            enc["blob"] += len(blobs)
        blobs += extra
    if tensors:  # the tensors beside the value, in a list or tuple, where it sits
        items = [enc for enc, _ in tensors]
        items.insert(draw(st.integers(0, len(items))), value)
        value = {"t": draw(st.sampled_from(["list", "tuple"])), "items": items}
    return value, blobs


def _decode(enc: Any, blobs: list[bytes]) -> Any:
    return protocol.decode(enc, blobs, lambda id_, type_: ("handle", id_, type_))


# ================================================================ wire: framing


def test_protocol_errors_are_the_clients():
    """protocol raises the very class the client catches (not a copy loaded by path)."""
    assert protocol.ProtocolError is wire.ProtocolError


@FUZZ
@given(headers, blob_lists)
def test_whole_messages_round_trip(header, blobs):
    """Baseline: what wire.send writes, wire.recv reads back unchanged (so the fuzz below is not vacuous)."""
    got_header, got_blobs = _read(_message(header, blobs))
    assert got_blobs == blobs
    assert json.dumps(got_header, sort_keys=True) == json.dumps(
        dict(header, blobs=[len(b) for b in blobs]), sort_keys=True
    )


@FUZZ
@given(headers, blob_lists, st.data())
def test_truncated_message_then_closed_is_eof(header, blobs, data):
    """A message cut anywhere, then the socket closed: EOFError (the client: "the worker died")."""
    message = _message(header, blobs)
    cut = data.draw(st.integers(0, len(message) - 1), label="cut")
    with pytest.raises(EOFError):
        _read(message[:cut])


@SLOW_FUZZ
@given(headers, blob_lists, st.data(), st.booleans())
def test_truncated_message_left_open_times_out(header, blobs, data, with_deadline):
    """A message cut anywhere, the socket left open: TimeoutError once the deadline or socket timeout passes."""
    message = _message(header, blobs)
    cut = data.draw(st.integers(0, len(message) - 1), label="cut")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        _read(message[:cut], close=False, wait=0.02, deadline=with_deadline)
    assert time.monotonic() - started < PROMPT_SECONDS


def test_one_deadline_for_a_dripping_message():
    """A worker that keeps sending a byte at a time never gets past the one deadline for the whole message."""
    ours, theirs = socket.socketpair()
    stop = threading.Event()

    def drip() -> None:
        message = _message({"x": "y" * 1000}, [])
        for i in range(len(message)):
            if stop.wait(0.01):
                break
            try:
                theirs.sendall(message[i : i + 1])
            except OSError:
                break

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            _in_thread(wire.recv, ours, time.monotonic() + 0.2)
        assert time.monotonic() - started < PROMPT_SECONDS
    finally:
        stop.set()
        dripper.join(HANG_SECONDS)
        ours.close()
        theirs.close()


@FUZZ
@given(st.integers(wire.MAX_HEADER_BYTES + 1, 2**32 - 1), st.binary(max_size=32))
def test_oversized_length_prefix(n, rest):
    """A length over the header limit is refused at once, without waiting for (or allocating) the rest."""
    started = time.monotonic()
    with pytest.raises(ProtocolError):
        _read(struct.pack("!I", n) + rest, close=False)
    assert time.monotonic() - started < PROMPT_SECONDS


@FUZZ
@given(
    st.lists(st.integers(0, 2 * wire.MAX_MESSAGE_BYTES), min_size=1, max_size=5).filter(
        lambda sizes: sum(sizes) > wire.MAX_MESSAGE_BYTES
    ),
    st.dictionaries(st.sampled_from(["op", "value"]), json_values),
)
def test_oversized_blob_total(sizes, header):
    """Blobs adding up to over the message limit are refused before any of them is read."""
    started = time.monotonic()
    with pytest.raises(ProtocolError):
        _read(_frame(json.dumps(dict(header, blobs=sizes)).encode()), close=False)
    assert time.monotonic() - started < PROMPT_SECONDS


@FUZZ
@given(json_values | st.dictionaries(st.just("blobs"), json_values, min_size=1) | headers, st.booleans())
def test_header_without_a_valid_blob_list(header, close):
    """A JSON header that is not an object, or whose "blobs" is not a list of sizes: ProtocolError."""
    sizes = header.get("blobs") if isinstance(header, dict) else None
    assume(not (isinstance(sizes, list) and all(type(s) is int and s >= 0 for s in sizes)))
    with pytest.raises(ProtocolError):
        _read(_frame(json.dumps(header).encode()), close=close)


@FUZZ
@given(st.binary(max_size=200), st.booleans())
@example(b"\xff\xfe\xfd", True)  # not UTF-8 (nor 16 nor 32)
@example(b'{"blobs": [], "x": "\xc3\x28"}', False)  # invalid UTF-8 inside a string
@example(b"\x00", True)
@example(b"", False)
@example(b"1" * 5000, True)  # an integer over Python's digit limit
@example(b'{"blobs": [NaN]}', True)
@example('{"blobs": []}'.encode("utf-16"), False)  # another encoding: json reads it; a valid message
def test_garbage_header_bytes(payload, close):
    """A correct length prefix around any bytes at all: a well-formed message, or ProtocolError."""
    try:
        message = _read(_frame(payload), close=close)
    except ProtocolError:
        return
    _check_well_formed(message)  # valid JSON with a valid (here, empty) blob list


@FUZZ
@given(st.integers(1, 200_000), st.sampled_from(["[", '{"a":', '[{"b":']), st.booleans())
@example(1_000_000, "[", True)
def test_deeply_nested_header(depth, opener, close):
    """Deep nesting inside the header: decoded when shallow, else ProtocolError (never RecursionError)."""
    closer = "".join("]" if c == "[" else "}" for c in opener if c in "[{")[::-1]
    text = '{"blobs": [], "deep": ' + opener * depth + "0" + closer * depth + "}"
    try:
        message = _read(_frame(text.encode()), close=close)
    except ProtocolError:
        return
    _check_well_formed(message)
    assert depth < 10_000


@FUZZ
@given(st.binary(max_size=300), st.booleans())
@example(b'\x00\x00\x00\x0d{"blobs":[3]}ab', True)
@example(b"\xff\xff\xff\xff", False)
def test_random_stream(data, close):
    """Any bytes at all, then closed or left open: a message, ProtocolError, or (cut short) EOF / timeout."""
    expected = (ProtocolError, EOFError) if close else (ProtocolError, TimeoutError)
    try:
        message = _read(data, close=close, wait=0.5 if close else 0.02)
    except expected:
        return
    _check_well_formed(message)


@FUZZ
@given(st.lists(st.integers(0, 64), max_size=4), st.data())
def test_valid_header_garbage_blobs(sizes, data):
    """A valid header promising blobs, followed by random bytes: the promised blobs, or EOF when too few."""
    payload = data.draw(st.binary(max_size=300), label="payload")
    try:
        header, blobs = _read(_frame(json.dumps({"blobs": sizes}).encode()) + payload)
    except EOFError:
        assert len(payload) < sum(sizes)
        return
    assert [len(b) for b in blobs] == sizes and b"".join(blobs) == payload[: sum(sizes)]


# ================================================================ protocol: values and tensors


@settings(FUZZ, max_examples=100)
@given(encodings())
def test_decode_any_value(case):
    """Any value a worker might send decodes (to plain data, tensors, handles) or raises ProtocolError."""
    enc, blobs = case
    try:
        _decode(enc, blobs)
    except ProtocolError:
        pass


@FUZZ
@given(tensor_values())
def test_decode_tensor(case):
    """A tensor with the right dtype, shape and byte count comes back exactly; anything off: ProtocolError."""
    enc, blobs = case
    name, shape, index = enc.get("dtype"), enc.get("shape"), enc.get("blob")
    right = (
        enc.get("t") == "tensor"  # the strategy may leave out any one key, the tag too
        and isinstance(name, str)
        and name in protocol.DTYPES
        and isinstance(shape, list)
        and len(shape) <= 16
        and all(type(s) is int and s >= 0 for s in shape)
        and type(index) is int
        and 0 <= index < len(blobs)
        and math.prod(shape) * protocol.DTYPES[name].itemsize == len(blobs[index])
        and math.prod(max(s, 1) for s in shape) < protocol.MAX_SPAN
    )
    if not right:
        with pytest.raises(ProtocolError):
            _decode(enc, blobs)
        return
    tensor = _decode(enc, blobs)
    assert type(tensor) is torch.Tensor and tensor.dtype == protocol.DTYPES[name]
    assert list(tensor.shape) == shape and tensor.device.type == "cpu"
    assert bytes(tensor.reshape(-1).view(torch.uint8).tolist()) == blobs[index]  # the very bytes sent


@FUZZ
@given(st.integers(protocol.MAX_DEPTH - 2, 3 * protocol.MAX_DEPTH), st.sampled_from(["list", "tuple", "dict"]))
def test_decode_deep_values(depth, kind):
    """Values nested past MAX_DEPTH are refused with ProtocolError, not a RecursionError."""
    enc: dict = {"t": "py", "v": 1}
    for _ in range(depth):
        enc = {"t": kind, "items": {"k": enc} if kind == "dict" else [enc]}
    try:
        _decode(enc, [])
    except ProtocolError:
        assert depth >= protocol.MAX_DEPTH
    else:
        assert depth <= protocol.MAX_DEPTH + 1


# Values the fuzzing above found making decode raise ValueError or RuntimeError instead of ProtocolError
# (fixed in protocol.decode). Those escaped the client as "the grader itself failed", so a failing submission
# could have a check set aside instead of failed. Kept as named cases so that they cannot come back.
FOUND_BY_FUZZING = [
    pytest.param({"t": "generator", "seed": 2**64}, [], id="seed-over-uint64-ValueError"),
    pytest.param({"t": "generator", "seed": -INT64 - 1}, [], id="seed-under-int64-ValueError"),
    pytest.param(
        {"t": "tensor", "dtype": "float32", "shape": [0, 2**40, 2**40], "blob": 0},
        [b""],
        id="empty-tensor-stride-overflow-RuntimeError",
    ),
    pytest.param(
        {"t": "tensor", "dtype": "float32", "shape": [0, INT64], "blob": 0},
        [b""],
        id="empty-tensor-dim-over-int64-TypeError",
    ),
    pytest.param({"t": "tensor", "dtype": [], "shape": [], "blob": 0}, [b""], id="unhashable-dtype-TypeError"),
]


@pytest.mark.parametrize(("enc", "blobs"), FOUND_BY_FUZZING)
def test_decode_rejects_with_protocol_error(enc, blobs):
    with pytest.raises(ProtocolError):
        _decode(enc, blobs)


# ================================================================ the client: a whole reply, as graded


def _ask(reply: bytes, close: bool = True) -> Any:
    """What the client's request to a worker makes of this reply (its bytes, after the request is read)."""
    ours, theirs = socket.socketpair()

    def worker() -> None:
        try:
            theirs.settimeout(HANG_SECONDS)
            wire.recv(theirs)  # the request
        except (OSError, EOFError, ProtocolError):
            return
        _send_quietly(theirs, reply, close)

    server = types.SimpleNamespace(
        limits=client.Limits(call_seconds=2.0 if close else 0.02), reap=lambda pid, grace: {}
    )
    peer = threading.Thread(target=worker, daemon=True)
    peer.start()
    try:
        return _in_thread(client.WorkerConnection(server, ours, 12345, None).request, {"op": "call", "handle": 1})
    finally:
        ours.close()
        peer.join(HANG_SECONDS)
        theirs.close()


def _graded(reply: bytes, close: bool = True) -> None:
    """The reply decodes, or the client raises one of the exceptions a check is graded on."""
    try:
        _ask(reply, close)
    except (client.WorkerCrash, client.StudentError, client.ProbeFault):
        pass


errors = (
    st.fixed_dictionaries(
        {},
        optional={
            "type": json_values,
            "message": json_values,
            "where": json_values,
            "grader": st.booleans() | json_values,
            "trace": json_values,
        },
    )
    | json_values
)


@CLIENT_FUZZ
@given(encodings(), st.fixed_dictionaries({}, optional={"error": errors, "cpu": json_values}), st.booleans())
def test_client_reply(case, fields, with_value):
    """Any reply a worker can frame ends in a value or a graded outcome (WorkerCrash, StudentError, ProbeFault)."""
    enc, blobs = case
    _graded(_message(dict(fields, value=enc) if with_value else fields, blobs))


@CLIENT_FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_client_random_reply_bytes(data, close):
    """Any bytes at all as a reply, the socket then closed or left open: a graded outcome, never a hang."""
    _graded(data, close)


@pytest.mark.parametrize(("enc", "blobs"), FOUND_BY_FUZZING)
def test_client_grades_malformed_values(enc, blobs):
    """The values fuzzing found, end to end: the client makes a graded WorkerCrash of each."""
    with pytest.raises(client.WorkerCrash, match="malformed"):
        _ask(_message({"value": enc, "cpu": 0.0}, blobs))
