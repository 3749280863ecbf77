"""Typed views of every API's request and response, generated from kio's schema by
protocol/generate_views.py (its docstring says what each view holds).

A handler names its API's views (views/list_offsets.py):

    def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
        ...
        return {"topics": topics}

`request` is the kio entity of the client's version, read through a Protocol that lists
the fields of every served version; the answer is a plain dict that mypy checks against
the response's TypedDict (every name and type), and the dispatcher builds into the
response entity of the client's version (protocol.entities). The views cost nothing
when the broker runs: no request or response is wrapped in an object of its own.

A request field that some served versions lack reads as its default in those versions,
as in Kafka's generated message classes: `install_absent_defaults` sets those defaults
(views/apis.py's ABSENT) as class attributes of kio's classes, once per class, when
codec.request_class loads it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from typing import Any, Generic, Protocol, TypeVar

from ..apis import Api
from ..kio_schema import EntityField, EntityTupleField, classify_field

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")

# kio reads the all-zero UUID (a topic id not given) as None, which a view types as
# `uuid.UUID | None`; the broker keys topics by UUID, and the zero one names none.
ZERO_UUID = uuid.UUID(int=0)


class RecordsInFile(Protocol):
    """Records a response leaves in their file (storage.FileSlice, Fetch's answer): the
    encoder writes their length and passes the range on as a chunk of its own, which the
    connection sends from the file (broker/network/file_sender.py). A response
    view's records are bytes or these."""

    fd: int
    position: int
    size: int

    def __len__(self) -> int: ...


@dataclass(frozen=True, slots=True)
class View(Generic[RequestT, ResponseT]):
    """An API, typed with its request and response views (views/apis.py has one per API)."""

    api: Api


def install_absent_defaults(cls: type, absent: dict[str, dict[str, Any]]) -> None:
    """Give kio request class `cls`, and the classes nested in it, a class attribute for
    each field a served version of its message has and this version lacks (`absent`: per
    path of field names, the names and their defaults)."""

    def walk(struct: type, path: str) -> None:
        present = {f.name for f in fields(struct)}
        for name, default in absent.get(path, {}).items():
            if name not in present:
                setattr(struct, name, default)
        for f in fields(struct):
            kind = classify_field(f)
            if isinstance(kind, (EntityField, EntityTupleField)):
                walk(kind.type_, f"{path}.{f.name}" if path else f.name)

    walk(cls, "")
