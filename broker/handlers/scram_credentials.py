"""DescribeUserScramCredentials and AlterUserScramCredentials: the SCRAM users kept in
the data directory (broker/security/scram_credentials.py), with Kafka's checks and errors.

The client sends the salted password (the admin clients salt it themselves), never the
password; the broker keeps the stored and server keys derived from it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

from ..logging import get_logger
from ..security.authorizer import Operation
from ..security.sasl import Credentials
from ..security.scram_credentials import (
    BY_CODE,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    credential_from_salted_password,
)
from .context import RequestContext

if TYPE_CHECKING:
    from ottla.protocol.views.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        AlterUserScramCredentialsResult,
        ScramCredentialDeletion,
        ScramCredentialUpsertion,
    )
    from ottla.protocol.views.describe_user_scram_credentials import (
        CredentialInfo,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentialsResult,
    )

log = get_logger("ottla.scram")


def handle_describe(ctx: RequestContext, request: DescribeUserScramCredentialsRequest
                    ) -> DescribeUserScramCredentialsResponse:
    store = ctx.services.scram
    if not ctx.allowed_on_cluster(Operation.DESCRIBE):
        # Kafka's error answer: one result per user asked for, the error but no name.
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "results": [
            _described("", ErrorCode.cluster_authorization_failed, None) for _ in request.users or ()]}
    # Null or empty: every user (Kafka's "describe all").
    names = [u.name for u in request.users] if request.users else store.users()
    counts = Counter(names)
    results: list[DescribeUserScramCredentialsResult] = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(_described(name, ErrorCode.duplicate_resource,
                                      f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                      f"{name}"))
            continue
        credentials = store.of_user(name)
        if not credentials:
            results.append(_described(name, ErrorCode.resource_not_found,
                                      f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        infos: list[CredentialInfo] = [{"mechanism": code, "iterations": credentials[mechanism].iterations}
                 for code, mechanism in sorted(BY_CODE.items()) if mechanism in credentials]
        results.append(_described(name, ErrorCode.none, None, infos))
    return {"error_code": ErrorCode.none, "error_message": None, "results": results}


def _described(user: str, code: ErrorCode, message: str | None, infos: list[CredentialInfo] | None = None
               ) -> DescribeUserScramCredentialsResult:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": infos or []}


def handle_alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    store = ctx.services.scram
    if not ctx.allowed_on_cluster(Operation.ALTER):
        named = dict.fromkeys(x.name for x in (*request.deletions, *request.upsertions))
        return {"results": [{"user": u, "error_code": ErrorCode.cluster_authorization_failed,
                             "error_message": None} for u in named]}
    # Every user named more than once for one mechanism fails whole, as in Kafka.
    seen = Counter((x.name, x.mechanism) for x in (*request.deletions, *request.upsertions))
    users = list(dict.fromkeys(x.name for x in (*request.deletions, *request.upsertions)))
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for x in request.deletions:
        error = _problem(x, seen) or _deletion_problem(x, store)
        if error is not None and x.name not in errors:
            errors[x.name] = error
    for y in request.upsertions:
        error = _problem(y, seen) or _upsertion_problem(y)
        if error is not None and y.name not in errors:
            errors[y.name] = error
    upserts, deletions = [], []
    for x in request.deletions:
        if x.name not in errors:
            deletions.append((x.name, BY_CODE[x.mechanism]))
    for x in request.upsertions:
        if x.name not in errors:
            mechanism = BY_CODE[x.mechanism]
            upserts.append((x.name, mechanism, credential_from_salted_password(
                mechanism, bytes(x.salt), x.iterations, bytes(x.salted_password))))
    if upserts or deletions:
        store.change(upserts, deletions)
        log.info("scram credentials changed", upserted=[(u, m) for u, m, _ in upserts], deleted=deletions,
                 peer=ctx.peer)
    results: list[AlterUserScramCredentialsResult] = [
        {"user": user, "error_code": errors.get(user, (ErrorCode.none, None))[0],
         "error_message": errors.get(user, (ErrorCode.none, None))[1]} for user in users]
    return {"results": results}


def _problem(x: ScramCredentialDeletion | ScramCredentialUpsertion, seen: Counter[tuple[str, int]]
             ) -> tuple[ErrorCode, str] | None:
    if not x.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if x.mechanism not in BY_CODE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if seen[(x.name, x.mechanism)] > 1:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    return None


def _upsertion_problem(x: ScramCredentialUpsertion) -> tuple[ErrorCode, str] | None:
    if not x.salt or not x.salted_password:
        return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    if not MIN_ITERATIONS <= x.iterations <= MAX_ITERATIONS:
        return (ErrorCode.unacceptable_credential,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {x.iterations}")
    return None


def _deletion_problem(x: ScramCredentialDeletion, store: Credentials) -> tuple[ErrorCode, str] | None:
    if store.get(x.name, BY_CODE[x.mechanism]) is None:
        return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
    return None
