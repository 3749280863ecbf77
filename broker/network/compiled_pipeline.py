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

from .. import metrics
from ..handlers import HANDLERS, MAY_WAIT, RequestContext, context

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
if compiled is not None:
    compiled.configure(
        codec.parse_request_header, codec._decode_in_c, codec._encode_response_in_c, codec._encoding,
        codec.encode_response, context._builders, metrics._nested_error_plan, metrics._error_codes_in_c,
        RequestContext,
        tuple(compiled_codec.compiled.member_offset(RequestContext, name)
              for name in ("services", "header", "peer", "advertised_address", "session", "deferred", "throttle_ms")),
        metrics.LATENCY_BUCKETS)


def add_route(api: Api, cls: Any, api_key: int, version: int) -> None:
    """A pair the Python path has served: the C path may serve it from now on."""
    ROUTES[api_key << 16 | version] = (api, cls, HANDLERS[api_key], (api_key, version), api_key in MAY_WAIT)
