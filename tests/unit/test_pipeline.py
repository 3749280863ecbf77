"""broker/network/_pipeline.c, called directly: what it serves, and that every frame it
cannot serve whole (truncated, garbage, an unknown pair, a handler that may wait, faults
armed) it leaves to the Python path untouched, the handler never called.

The answers of both paths are compared in real brokers
(tests/integration/test_request_paths.py); here the C code's bounds are tried with
frames no client sends, and take with reads that are not one whole frame of an idle
connection. Break-and-see-it-fail, made once by hand: taking out serve's check of a
handler that may wait made test_frames_it_cannot_serve_are_left_to_python fail (the
JoinGroup served there, not left to the worker); taking out take's check that the
intake holds nothing made test_take_serves_one_whole_frame_of_an_idle_connection_and_nothing_else
fail (_held), and so did taking out its check of an answer still being sent from files;
lay_out_take passing a class without a slot it names on to C made
test_a_slot_take_reads_renamed_stops_the_start_with_its_name fail (C's ValueError, with no
name in it). take reads the real classes' slots: the connection here is a Connection,
its intake, reader and request memory real ones. An answer encoded ahead of time
(codec.Encoded): with its body written over the flexible header's tagged-fields byte,
test_an_answer_encoded_ahead_is_sent_with_each_correlation_id_and_counted failed (the
bytes), and with its entity's errors left uncounted it failed too (error_codes given the
Encoded); with codec._encoded_ahead leaving out that byte,
test_an_answer_encoded_ahead_is_encoded_as_its_entity failed with OTTLA_PURE_PYTHON=1.
With take's call of Connection._run_deferred left out,
test_take_runs_the_handlers_deferred_work_right_after_its_answer failed (no work run)."""

from __future__ import annotations

import random
import struct
from collections import deque
from typing import Any

import pytest

from ottla.broker.handlers import RequestContext
from ottla.broker.metrics import Metrics
from ottla.broker.network import compiled_pipeline
from ottla.broker.network.connection import Connection
from ottla.broker.network.file_sender import FileSender
from ottla.broker.network.frame_intake import FrameIntake
from ottla.broker.network.request_memory import RequestMemory
from ottla.protocol import compiled_codec
from ottla.protocol.apis import SUPPORTED
from ottla.protocol.codec import (
    Encoded,
    encode_request,
    encode_response,
    encode_response_in_python,
    request_class,
    response_class,
)
from ottla.protocol.entities import make
from tests.unit.extensions import compiled_extension
from tests.wire import request

HEARTBEAT, JOIN_GROUP = 12, 11


class Faults:
    armed = False


class Session:
    close_after_response = False


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.written.append(data)


class Waiting:
    """The worker's wake-up future, not yet set: the worker waits."""

    def done(self) -> bool:
        return False


def _idle(connection: Connection) -> Connection:
    """`connection` as an idle connection's state, the state _pipeline.c's take reads (its
    slots: compiled_pipeline.TAKE_SLOTS): the reader between frames, nothing held or
    queued, the worker waiting."""
    connection.last_active, connection.client_id = 0.0, None
    connection._intake = FrameIntake(100 * 1024 * 1024, RequestMemory(0), lambda backlog: None)
    connection._wakeup = Waiting()
    connection._unfinished = connection._drained = connection._muted = connection._file_sender = None
    connection._closing = False
    return connection


CONNECTION = _idle(Connection.__new__(Connection))  # the real class: take reads it at its slots' offsets


@pytest.fixture
def served() -> tuple[Any, list[tuple[Any, Any]], Transport, Metrics, dict[int, Any]]:
    pipeline = compiled_extension("_pipeline", "ottla.broker.network")
    if compiled_pipeline.compiled is None:  # OTTLA_PURE_PYTHON=1: the connection does not use it
        pytest.skip("OTTLA_PURE_PYTHON=1: the broker serves every request through the Python path")
    calls: list[tuple[Any, Any]] = []
    answer = make(response_class(HEARTBEAT, 4), throttle_time=0, error_code=0)

    def heartbeat(ctx: Any, body: Any) -> Any:
        calls.append((ctx, body))
        return answer

    routes: dict[int, Any] = {
        HEARTBEAT << 16 | 4: (SUPPORTED[HEARTBEAT], request_class(HEARTBEAT, 4), heartbeat, (HEARTBEAT, 4), False),
        JOIN_GROUP << 16 | 5: (SUPPORTED[JOIN_GROUP], request_class(JOIN_GROUP, 5), heartbeat, (JOIN_GROUP, 5), True),
    }
    transport, metrics = Transport(), Metrics()
    serving = pipeline.Pipeline(routes, "services", "1.2.3.4:5", ("host", 9), Session(), Faults(), metrics,
                                CONNECTION, transport, lambda: 42.0)
    return serving, calls, transport, metrics, routes


def _heartbeat_frame(correlation_id: int = 7) -> bytes:
    entity = request(HEARTBEAT, 4, group_id="g", generation_id=3, member_id="m", group_instance_id=None)
    return encode_request(correlation_id, "unit", entity)[4:]  # without the size prefix


def test_a_frame_is_served_as_the_python_path_serves_it(served) -> None:
    serving, calls, transport, metrics, _ = served
    header, api, body, ctx, response, out = serving.serve(memoryview(_heartbeat_frame()))
    assert out is True and len(calls) == 1
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (HEARTBEAT, 4, 7, "unit")
    assert api is SUPPORTED[HEARTBEAT] and (body.group_id, body.generation_id, body.member_id) == ("g", 3, "m")
    assert isinstance(ctx, RequestContext) and (ctx.peer, ctx.advertised_address, ctx.deferred) == (
        "1.2.3.4:5", ("host", 9), None)
    assert ctx.header is header and ctx.throttle_ms == 0 and ctx.services == "services"
    assert isinstance(ctx.session, Session)
    assert transport.written == [b"".join(encode_response_in_python(7, response))]
    assert metrics.apis[HEARTBEAT].requests == 1  # the first of an API by Metrics.request_served...
    serving.serve(memoryview(_heartbeat_frame()))
    assert metrics.apis[HEARTBEAT].requests == 2  # ...the next here
    assert sum(metrics.apis[HEARTBEAT].buckets) == 2 and metrics.bytes_out == 2 * len(transport.written[0])


def test_frames_it_cannot_serve_are_left_to_python(served) -> None:
    serving, calls, transport, _, routes = served
    whole = _heartbeat_frame()
    for cut in range(len(whole)):
        assert serving.serve(memoryview(whole[:cut])) is None, f"cut at {cut}"
    rng = random.Random(45)
    for _ in range(2000):
        garbage = struct.pack(">hh", HEARTBEAT, 4) + rng.randbytes(rng.randrange(0, 64))
        served_ = serving.serve(memoryview(garbage))
        assert served_ is None or served_[2].group_id is not None
    calls_before = len(calls)
    assert serving.serve(memoryview(struct.pack(">hhih", 99, 0, 1, -1))) is None  # no route
    join = encode_request(1, "unit", request(JOIN_GROUP, 5, group_id="g", session_timeout=1, rebalance_timeout=1,
                                             member_id="", group_instance_id=None, protocol_type="consumer",
                                             protocols=[]))[4:]
    assert serving.serve(memoryview(join)) is None  # its handler may wait: the worker's
    assert serving.serve(memoryview(whole + b"\x00" * 70_000)) is None  # over the inline bound
    Faults.armed = True
    try:
        assert serving.serve(memoryview(whole)) is None
    finally:
        Faults.armed = False
    assert len(calls) == calls_before
    del routes[HEARTBEAT << 16 | 4]
    assert serving.serve(memoryview(whole)) is None


def test_compiled_path_is_the_codecs() -> None:
    """The C pipeline runs exactly where the compiled codec does."""
    assert (compiled_pipeline.compiled is not None) == compiled_codec.ENABLED


def test_take_serves_one_whole_frame_of_an_idle_connection_and_nothing_else(served) -> None:
    serving, calls, transport, metrics, _ = served
    connection = _idle(CONNECTION)
    frame = _heartbeat_frame(9)
    whole = struct.pack(">i", len(frame)) + frame
    assert serving.take(whole) is True and len(calls) == 1 and connection.client_id == "unit"
    assert struct.unpack_from(">i", transport.written[-1], 4)[0] == 9 and connection.last_active == 42.0
    # data_received's counting is take's, whatever it then makes of the bytes.
    assert metrics.bytes_in == len(whole)
    connection.last_active = 0.0
    assert serving.take(whole[:3]) is None and metrics.bytes_in == len(whole) + 3 and connection.last_active == 42.0
    # What is not one whole frame: the size prefix lies (by one, either way, or is
    # negative), the frame is cut, two frames, less than a prefix; a bytearray.
    rng = random.Random(45)
    for data in (struct.pack(">i", len(frame) + 1) + frame, struct.pack(">i", len(frame) - 1) + frame,
                 struct.pack(">i", -len(frame)) + frame, whole[:-1], whole + whole, whole[:4], whole[:3], b"",
                 bytearray(whole), *(rng.randbytes(rng.randrange(0, 40)) for _ in range(2000))):
        assert serving.take(data) is None
    # A connection that is not idle, or a reader or intake holding something.
    for attribute, value in (("_wakeup", None), ("_unfinished", ()), ("_drained", 1), ("_muted", 1),
                             ("_closing", True)):
        setattr(_idle(connection), attribute, value)
        assert serving.take(whole) is None, attribute
    for owner, attribute, value in (("reader", "_size", 10), ("reader", "_prefix", bytearray(b"\0")),
                                    ("reader", "backlog", b"x"), ("reader", "max_bytes", len(frame) - 1),
                                    ("intake", "_held", 1), ("intake", "frames", deque([frame]))):
        _idle(connection)
        setattr(connection._intake if owner == "intake" else connection._intake.reader, attribute, value)
        assert serving.take(whole) is None, attribute
    _idle(connection)._intake.memory.limit = connection._intake.memory.used = 10
    assert serving.take(whole) is None, "the request memory full"
    assert len(calls) == 1  # none of them reached the handler
    connection._intake.memory.used = 9
    assert serving.take(whole) is True and len(calls) == 2
    # An answer still being sent from files: what follows waits behind it; once sent, not.
    sender = FileSender.__new__(FileSender)
    _idle(connection)._file_sender, sender.finished = sender, Waiting()
    assert serving.take(whole) is None
    sender.finished = None
    assert serving.take(whole) is True and len(calls) == 3


def test_take_reads_only_the_classes_laid_out(served) -> None:
    """take reads its state at the offsets of the classes' slots: an object of another
    class where one is laid out is refused (TypeError), never read at those offsets."""
    serving, calls, _, _, _ = served
    frame = _heartbeat_frame()
    whole = struct.pack(">i", len(frame)) + frame
    for owner, attribute, value in (("connection", "_intake", object()), ("intake", "reader", bytearray()),
                                    ("intake", "memory", object()), ("connection", "_file_sender", object())):
        connection = _idle(CONNECTION)
        setattr(connection if owner == "connection" else connection._intake, attribute, value)
        with pytest.raises(TypeError, match="where a .* was laid out"):
            serving.take(whole)
    assert not calls
    with pytest.raises(TypeError, match="not of the class configure_take laid out"):
        serving.__class__({}, None, "", ("h", 1), Session(), Faults(), Metrics(), object(), Transport(), float)


def test_a_slot_take_reads_renamed_stops_the_start_with_its_name() -> None:
    """compiled_pipeline.TAKE_SLOTS names what take reads; lay_out_take, run as
    connection.py is imported, refuses a class where one of them is no slot, naming it
    (and hands C nothing of it)."""
    if compiled_pipeline.compiled is None:
        pytest.skip("OTTLA_PURE_PYTHON=1: no C pipeline to lay out")

    class Renamed:  # Connection's slots that take reads, _file_sender renamed
        __slots__ = ("_intake", "_wakeup", "_unfinished", "_drained", "_muted", "_closing", "_files", "last_active",
                     "client_id")

    with pytest.raises(TypeError, match=r"Renamed\._file_sender: no slot of its class"):
        compiled_pipeline.lay_out_take(Renamed)

    class Unslotted:
        pass

    with pytest.raises(TypeError, match=r"Unslotted\._intake, _wakeup, .*client_id: no slot"):
        compiled_pipeline.lay_out_take(Unslotted)

    class Undeferring(Connection):  # the method take runs deferred work through, renamed
        _run_deferred = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"Undeferring\._run_deferred: no method of its class"):
        compiled_pipeline.lay_out_take(Undeferring)


def _heartbeat_answers() -> list[Any]:
    """Heartbeat answers of a flexible version (v4) and of one before (v0), one with an error."""
    return [make(response_class(HEARTBEAT, 4), throttle_time=0, error_code=16),
            make(response_class(HEARTBEAT, 0), error_code=0)]


def test_an_answer_encoded_ahead_is_encoded_as_its_entity() -> None:
    """codec.Encoded (Metadata's kept answers): each correlation id's frame is the one its
    entity gives, flexible header or not, on the path this run takes (both, with and
    without OTTLA_PURE_PYTHON=1)."""
    for entity in _heartbeat_answers():
        ahead = Encoded(entity)
        for correlation_id in (0, 7, -1, 2**31 - 1):
            expected = b"".join(encode_response_in_python(correlation_id, entity))
            assert b"".join(encode_response(correlation_id, ahead)) == expected
            assert b"".join(encode_response_in_python(correlation_id, ahead)) == expected


def test_an_answer_encoded_ahead_is_sent_with_each_correlation_id_and_counted(served) -> None:
    """A handler's codec.Encoded: _pipeline.c writes its header, the request's correlation
    id, before its bytes, and counts its entity's error codes, as the Python path does."""
    serving, calls, transport, metrics, routes = served
    flexible, older = _heartbeat_answers()
    answers = {4: Encoded(flexible), 0: Encoded(older)}
    routes[HEARTBEAT << 16 | 0] = (SUPPORTED[HEARTBEAT], request_class(HEARTBEAT, 0),
                                   lambda ctx, body: answers[0], (HEARTBEAT, 0), False)
    routes[HEARTBEAT << 16 | 4] = routes[HEARTBEAT << 16 | 4][:2] + (lambda ctx, body: answers[4],) + \
        routes[HEARTBEAT << 16 | 4][3:]
    expected = []
    for correlation_id in (7, 8, 2**31 - 1):
        for version in (4, 0):
            entity = request(HEARTBEAT, version, group_id="g", generation_id=3, member_id="m",
                             **({"group_instance_id": None} if version >= 3 else {}))
            *_, out = serving.serve(memoryview(encode_request(correlation_id, "unit", entity)[4:]))
            assert out is True
            expected.append(b"".join(encode_response_in_python(correlation_id, answers[version].entity)))
    assert transport.written == expected
    # Each answer's error codes, the Python path's Metrics.request_served counting the first.
    assert metrics.apis[HEARTBEAT].requests == 6 and metrics.apis[HEARTBEAT].errors == {16: 3}


def test_take_runs_the_handlers_deferred_work_right_after_its_answer(served, capsys) -> None:
    """A handler's work for after its response (RequestContext.after_response, EndTxn's
    markers): take runs it, through Connection._run_deferred, once the answer is written
    and before it returns, in the order it was left; what fails is logged and the next
    request served."""
    serving, calls, transport, _, routes = served
    done: list[Any] = []

    def ends(ctx: Any, body: Any) -> Any:
        calls.append((ctx, body))
        ctx.after_response(lambda: done.append(("first", len(transport.written))))
        ctx.after_response(lambda: done.append(("second", len(transport.written))))
        ctx.after_response(lambda: 1 / 0)
        return make(response_class(HEARTBEAT, 4), throttle_time=0, error_code=0)

    routes[HEARTBEAT << 16 | 4] = routes[HEARTBEAT << 16 | 4][:2] + (ends,) + routes[HEARTBEAT << 16 | 4][3:]
    connection = _idle(CONNECTION)
    frame = _heartbeat_frame(11)
    whole = struct.pack(">i", len(frame)) + frame
    assert serving.take(whole) is True and connection.client_id == "unit"
    assert done == [("first", 1), ("second", 1)]  # after the answer was written, in order
    assert "work after the response failed" in capsys.readouterr().out
    assert serving.take(whole) is True and len(done) == 4 and len(transport.written) == 2
