"""ApiVersions: which APIs and versions this broker speaks (from protocol.apis)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ottla.protocol.apis import SUPPORTED
from ottla.protocol.codec import response_class
from ottla.protocol.entities import make
from ottla.protocol.errors import ErrorCode

from .context import Built, RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse


def _api_keys() -> list[ApiVersion]:
    return [
        {
            "api_key": api.key,
            "min_version": api.min_version if api.advertised_min is None else api.advertised_min,
            "max_version": api.max_version,
        }
        for api in SUPPORTED.values()
    ]


# Feature levels (KIP-584), as a Kafka 4.1 broker reports them, limited to what Ottla
# serves: (name, lowest supported, highest supported, finalized level).
# - metadata.version 27 is 4.1-IV1, what `inter.broker.protocol.version` describes.
# - transaction.version 2 (KIP-890 part 2), as Kafka 4.x finalizes it: Produce v12 adds
#   partitions to a transaction implicitly and EndTxn v5 bumps the epoch at every end.
#   Clients that know only version 1 (librdkafka) keep using AddPartitionsToTxn and
#   EndTxn below v5, which the broker still serves with verification (part 1).
# - group.version 1: KIP-848 consumer groups (ConsumerGroupHeartbeat/Describe). The
#   Java client uses the consumer protocol only where it is finalized.
# - share.version 1: KIP-932 share groups (ShareGroupHeartbeat, ShareFetch...), which
#   Kafka 4.3 finalizes by default; share consumers look for it.
# - streams.version 1: KIP-1071 streams groups (StreamsGroupHeartbeat/Describe), which
#   Kafka 4.3 finalizes by default; Kafka Streams with group.protocol=streams refuses
#   a broker that does not.
FEATURES = (
    ("metadata.version", 7, 27, 27),
    ("transaction.version", 0, 2, 2),
    ("group.version", 0, 1, 1),
    ("share.version", 0, 1, 1),
    ("streams.version", 0, 1, 1),
)
# KRaft reports the metadata offset the levels were read at; any value >= 0 says
# "these are finalized" (-1: none are).
FINALIZED_FEATURES_EPOCH = 1


# The answer never changes: built once per version (building it costs more than the
# rest of the round trip; entities are immutable, so one serves every connection).
_ANSWERS: dict[int, Built[ApiVersionsResponse]] = {}


# What Kafka accepts as client_software_name and _version (KIP-511); anything else is
# INVALID_REQUEST with no API list.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse | Built[ApiVersionsResponse]:
    if ctx.version >= 3 and not (_SOFTWARE.fullmatch(request.client_software_name)
                                 and _SOFTWARE.fullmatch(request.client_software_version)):
        return {"error_code": ErrorCode.invalid_request, "api_keys": []}
    answer = _ANSWERS.get(ctx.version)
    if answer is None:
        answer = _ANSWERS[ctx.version] = ctx.entity(_answer(ctx))
    return answer


def _answer(ctx: RequestContext) -> ApiVersionsResponse:
    if ctx.version < 3:  # the feature fields came with v3
        return {"error_code": ErrorCode.none, "api_keys": _api_keys()}
    # KIP-1022: a feature whose lowest supported level is 0 is left out of the supported
    # features of ApiVersions v3 (older clients took a 0 minimum for an error); v4 lists
    # them all. Kafka 4.3 answers v3 with metadata.version alone.
    supported = [(name, low, high) for name, low, high, _ in FEATURES if low > 0 or ctx.version >= 4]
    return {
        "error_code": ErrorCode.none, "api_keys": _api_keys(),
        "supported_features": [{"name": name, "min_version": low, "max_version": high}
                               for name, low, high in supported],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [{"name": name, "min_version_level": level, "max_version_level": level}
                               for name, _, _, level in FEATURES],
    }


def unsupported_version_response() -> Any:
    """The v0 answer to an ApiVersions version we do not know: UNSUPPORTED_VERSION and,
    as Kafka (KIP-511), ApiVersions' own version range only, so the client can pick a
    version and retry."""
    v0 = response_class(18, 0)
    assert v0 is not None, "kio has every version of ApiVersions"
    own = [k for k in _api_keys() if k["api_key"] == 18]
    return make(v0, error_code=ErrorCode.unsupported_version, api_keys=own)
