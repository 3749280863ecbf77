"""FindCoordinator: this broker coordinates every group and every transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ottla.protocol.codec import Encoded
from ottla.protocol.errors import ErrorCode

from ..security.authorizer import Operation, ResourceType
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse

GROUP, TRANSACTION = 0, 1
# The enum members read at every FindCoordinator, read once: on Python 3.11 a member
# read off its class goes through EnumType.__getattr__'s slot, about 1k instructions each
# (as groups.py's for Heartbeat).
_DESCRIBE, _GROUP_RESOURCE, _TXN_RESOURCE = Operation.DESCRIBE, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
_NO_ERROR, _NOT_AVAILABLE = ErrorCode.none, ErrorCode.coordinator_not_available
# The answers to one key where all is well and no authorizer is configured, kept encoded
# (as Metadata's kept answers): a transactional producer asks again before each
# transaction, a consumer at each start, and the answer depends only on what the key
# holds (the version, the key's type and name, this broker's id, the listener's
# address). At most KEPT_ANSWERS, the oldest let go first: a client naming ever new keys
# only makes each answer built again, as without them; a key longer than KEPT_KEY_MAX
# characters is answered but not kept, so what is kept stays small whatever clients send.
KEPT_ANSWERS, KEPT_KEY_MAX = 256, 249
# The error_message of a v1-v3 answer: Kafka's Errors.message() of its code.
_OLD_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}
_kept: dict[tuple[int, int, str, int, str, int], Encoded] = {}


def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse | Encoded:
    services = ctx.services
    version = ctx.header.api_version
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    key_type = request.key_type
    host, port = ctx.advertised_address
    # ctx.allowed's answer without its call where no authorizer is configured.
    checked = services.authorizer is not None
    kept_as = None
    if not checked and len(keys) == 1 and len(keys[0]) <= KEPT_KEY_MAX and (key_type == GROUP or (
            key_type == TRANSACTION and services.transactions.ensure_topic())):
        kept_as = (version, key_type, keys[0], services.node_id, host, port)
        found = _kept.get(kept_as)
        if found is not None:
            return found
    answers: list[Coordinator] = []
    for key in keys:
        resource = _GROUP_RESOURCE if key_type == GROUP else _TXN_RESOURCE
        if key_type in (GROUP, TRANSACTION) and checked and not ctx.allowed(_DESCRIBE, resource, key):
            code = ErrorCode.group_authorization_failed if key_type == GROUP \
                else ErrorCode.transactional_id_authorization_failed
            answers.append({"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1})
        elif key_type == TRANSACTION and not services.transactions.ensure_topic():
            # As Kafka while its __transaction_state cannot be made: ask again later.
            answers.append({"key": key, "error_code": _NOT_AVAILABLE, "node_id": -1, "host": "", "port": -1})
        elif key_type in (GROUP, TRANSACTION):
            answers.append({"key": key, "error_code": _NO_ERROR, "node_id": services.node_id, "host": host,
                            "port": port})
        else:
            answers.append({"key": key, "error_code": ErrorCode.invalid_request, "node_id": -1, "host": "",
                            "port": -1, "error_message": f"unknown coordinator key type {key_type}"})
    if version >= 4:
        response: FindCoordinatorResponse = {"coordinators": answers}
    else:
        answer = answers[0]
        response = {"error_code": answer["error_code"], "node_id": answer["node_id"], "host": answer["host"],
                    "port": answer["port"]}
        if version >= 1:
            # Kafka answers v1-v3 with its error's own text, "NONE" when all is well.
            response["error_message"] = answer.get("error_message") or _OLD_MESSAGES.get(answer["error_code"])
    if kept_as is None or answers[0]["error_code"] is not _NO_ERROR:
        return response
    if len(_kept) >= KEPT_ANSWERS:
        del _kept[next(iter(_kept))]  # the oldest
    encoded = _kept[kept_as] = Encoded(ctx.entity(response))
    return encoded
