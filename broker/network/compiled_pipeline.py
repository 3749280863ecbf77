"""The inline request path in C (_pipeline.c): its set-up, and the routes it serves.

connection.py's `_serve_inline` serves a request read from the socket right there when
nothing is ahead of it: the header, the (api key, version) look-up, the body, the
RequestContext, the handler (Dispatcher.handle_now), the response's building, the metrics
(Metrics.request_served) and the encoding, a dozen Python calls of 1-2k instructions
each whatever they do. _pipeline.c makes them one C call that calls back into Python for
the handler alone (and for what is rare: a response class met for the first time, an
API's first request); for a read of one whole frame, the commonest, that call also
splits it and makes _take's checks that the worker is idle (Pipeline.take). Those Python
steps stay the specification, and the path taken without the compiled codec (no C
compiler, OTTLA_PURE_PYTHON=1): the C code answers None, having done nothing, wherever
the Python steps are to serve a frame, and tests/integration/test_request_paths.py
compares both paths' answers and metrics.
"""

from __future__ import annotations

import importlib
from typing import Any

from ottla.protocol import codec, compiled_codec
from ottla.protocol.apis import Api
from ottla.protocol.framing import FrameReader

from .. import metrics
from ..handlers import HANDLERS, MAY_WAIT, RequestContext, context
from .file_sender import FileSender
from .frame_intake import FrameIntake
from .request_memory import RequestMemory

# (api key << 16 | version) -> (api, request class, handler, (api key, version), whether
# its handler may wait): each pair added by connection.py once its Python path has
# served it (and so checked it is served), then looked up by the C code.
ROUTES: dict[int, tuple[Api, Any, Any, tuple[int, int], bool]] = {}

compiled: Any = None  # the extension, where the compiled codec is the path taken
if compiled_codec.ENABLED and metrics._error_codes_in_c is not None:
    try:
        compiled = importlib.import_module("._pipeline", __package__)
    except ImportError:  # installed without a C compiler
        compiled = None

# What the C path counts at the offsets of their slots (Connection.data_received's,
# Metrics.request_served's and Connection._write's counters), class by class in
# _pipeline.c's order.
METRICS_SLOTS = ((metrics.Metrics, ("bytes_in", "bytes_out")),
                 (metrics.ApiMetrics, ("requests", "seconds", "buckets", "errors")))


def _layout(slots: tuple[tuple[type, tuple[str, ...]], ...]) -> tuple[tuple[type, tuple[int, ...]], ...]:
    """(class, its slots' offsets) for each (class, slot names), refusing with the class
    and the names any that is no slot of it: a rename stops the broker's start, instead of
    failing each request."""
    assert compiled is not None
    layout = []
    for cls, names in slots:
        offsets = tuple(compiled_codec.compiled.member_offset(cls, name) for name in names)
        missing = [name for name, offset in zip(names, offsets, strict=True) if offset < 0]
        if missing:
            raise TypeError(f"{cls.__qualname__}.{', '.join(missing)}: no slot of its class, where _pipeline.c "
                            "reads it (compiled_pipeline.TAKE_SLOTS, METRICS_SLOTS)")
        layout.append((cls, offsets))
    return tuple(layout)


if compiled is not None:
    compiled.configure(
        codec.parse_request_header, codec._decode_in_c, codec._encode_response_in_c, codec._encoding,
        codec.encode_response, context._builders, metrics._nested_error_plan, metrics._error_codes_in_c,
        RequestContext,
        tuple(compiled_codec.compiled.member_offset(RequestContext, name)
              for name in ("services", "header", "peer", "advertised_address", "session", "deferred", "throttle_ms")),
        metrics.LATENCY_BUCKETS, _layout(METRICS_SLOTS))
    # A response encoded ahead of time (Metadata's kept answers): sent as its header and its
    # bytes, its entity's errors counted.
    compiled.configure_encoded(_layout(((codec.Encoded, ("entity", "flexible", "body")),))[0])


def add_route(api: Api, cls: Any, api_key: int, version: int) -> None:
    """A pair the Python path has served: the C path may serve it from now on."""
    ROUTES[api_key << 16 | version] = (api, cls, HANDLERS[api_key], (api_key, version), api_key in MAY_WAIT)


# What Pipeline.take reads of a connection's state to know it idle (and the two fields it
# sets, last_active and client_id), class by class in _pipeline.c's order: each name a
# slot of its class, handed to C as its offset once, when connection.py is imported
# (lay_out_take). A name renamed or no longer a slot stops that import with the name,
# instead of failing each request.
TAKE_SLOTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Connection", ("_intake", "_wakeup", "_unfinished", "_drained", "_muted", "_closing", "_file_sender",
                    "last_active", "client_id")),
    ("FrameIntake", ("reader", "memory", "_pooled", "_held", "frames")),
    ("FrameReader", ("_size", "_prefix", "backlog", "max_bytes")),
    ("RequestMemory", ("limit", "used")),
    ("FileSender", ("finished",)),
)


def lay_out_take(connection: type) -> None:
    """Hand _pipeline.c the offsets of TAKE_SLOTS in `connection` (connection.Connection,
    which imports this module) and the classes it holds."""
    if compiled is None:
        return
    classes = {"Connection": connection, "FrameIntake": FrameIntake, "FrameReader": FrameReader,
               "RequestMemory": RequestMemory, "FileSender": FileSender}
    layout = _layout(tuple((classes[name], slots) for name, slots in TAKE_SLOTS))
    if not callable(getattr(connection, "_run_deferred", None)):  # take runs a handler's deferred work through it
        raise TypeError(f"{connection.__qualname__}._run_deferred: no method of its class, where _pipeline.c calls it")
    compiled.configure_take(layout)
