"""ApiVersions: which APIs and versions this broker speaks (from protocol.apis)."""

from __future__ import annotations

from typing import Any

from .context import RequestContext

from ottla.protocol.apis import SUPPORTED
from ottla.protocol.codec import response_class
from ottla.protocol.entities import make
from ottla.protocol.errors import ErrorCode


def _api_keys() -> list[dict[str, int]]:
    return [
        {
            "api_key": api.key,
            "min_version": api.min_version if api.advertised_min is None else api.advertised_min,
            "max_version": api.max_version,
        }
        for api in SUPPORTED.values()
    ]


def handle(ctx: RequestContext, request: Any) -> Any:
    return ctx.respond(error_code=ErrorCode.none, api_keys=_api_keys(), finalized_features_epoch=-1)


def unsupported_version_response() -> Any:
    """The v0 answer to an ApiVersions version we do not know: UNSUPPORTED_VERSION and
    the list of what we do support, so the client can pick a version and retry."""
    return make(response_class(18, 0), error_code=ErrorCode.unsupported_version, api_keys=_api_keys())
