"""Faults on demand, so a CI job can test its producers' retries and exactly-once
handling against the failures Kafka clients must survive.

A fault is set through the admin endpoint (POST /faults) or the pytest plugin, and
applies to the next `count` requests of an API (optionally only those naming one topic,
or one partition of it):

- `error`: the request is not handled; it is answered with the chosen error code in
  every place of the response (Kafka's error response, protocol/error_responses.py),
  so the error means what it means from Kafka: nothing was done.
- `drop`: the request is handled (a Produce is appended) and its response is never
  sent: a lost acknowledgement. The client times the request out and retries, and the
  broker's sequence cache must recognise the retry as a duplicate.
- `delay`: the response is sent `delay_ms` late. Later requests on the connection wait
  behind it, as they do behind a slow Kafka request.
- `close`: the request is handled, and the connection is closed instead of answering:
  a network failure after the broker did the work.
- `disk_error`: not about a request but the disk: the next `count` writes to the topic
  (or to one partition of it, or to any partition) fail with EIO before a byte is
  written, as on a failing disk. A Produce gets KAFKA_STORAGE_ERROR; a transaction
  marker is retried by its coordinator until it is written.
- `disk_full`: the same with ENOSPC, as on a full disk.

Each injection is logged and counted in /metrics. The connection asks `take` once per
request; with no fault set that is one attribute test.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from ottla.protocol.apis import PRODUCE, SUPPORTED
from ottla.protocol.codec import RequestHeader
from ottla.protocol.error_responses import error_response, has_error_response, named_partitions, names_topics
from ottla.protocol.errors import ErrorCode

from .logging import get_logger

if TYPE_CHECKING:
    from ottla.storage.log_manager import LogManager

    from .metrics import Metrics

log = get_logger("ottla.faults")


class Exchange(Protocol):
    """What a fault reads of the request it meets, and answers it with
    (handlers/context.py's RequestContext)."""

    header: RequestHeader
    peer: str

    def entity(self, values: dict[str, Any]) -> Any: ...



class FaultKind(StrEnum):
    ERROR = "error"
    DROP = "drop"
    DELAY = "delay"
    CLOSE = "close"
    DISK_ERROR = "disk_error"
    DISK_FULL = "disk_full"


# The kinds that are about the disk's writes, not a request, and the error each raises.
_WRITE_ERRORS = {FaultKind.DISK_ERROR: (errno.EIO, "injected disk error"),
                 FaultKind.DISK_FULL: (errno.ENOSPC, "injected full disk")}

_MAX_DELAY_MS = 10 * 60 * 1000
_API_BY_NAME = {api.name.lower(): api for api in SUPPORTED.values()}


class FaultSpecError(ValueError):
    """A fault that cannot be set; the message says why."""


@dataclass(slots=True)
class Fault:
    id: int
    kind: FaultKind
    api: str | None  # None: any API
    remaining: int
    topic: str | None = None
    partition: int | None = None
    error: str | None = None  # Kafka's name, NOT_LEADER_OR_FOLLOWER...
    delay_ms: int | None = None

    def describe(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


def parse_fault(spec: dict[str, Any], fault_id: int) -> Fault:
    """A Fault from its JSON description; FaultSpecError says what is wrong with it."""
    unknown = set(spec) - {"kind", "api", "count", "topic", "partition", "error", "delay_ms"}
    if unknown:
        raise FaultSpecError(f"unknown fault fields: {', '.join(sorted(unknown))}")
    try:
        kind = FaultKind(str(spec.get("kind")))
    except ValueError:
        raise FaultSpecError(f"kind must be one of {', '.join(FaultKind)}, got {spec.get('kind')!r}") from None
    # A dropped acknowledgement is about Produce unless said otherwise.
    api_text = spec.get("api", PRODUCE.name if kind == FaultKind.DROP else None)
    if kind in _WRITE_ERRORS and api_text is not None:
        raise FaultSpecError(f"a {kind} fault is about writes, not an API")
    api = None
    if api_text is not None:
        api = _API_BY_NAME.get(str(api_text).lower()) or SUPPORTED.get(api_text if isinstance(api_text, int) else -1)
        if api is None:
            raise FaultSpecError(f"unknown API {api_text!r}")
    count = _int(spec, "count", 1)
    if count < 1:
        raise FaultSpecError("count must be at least 1")
    topic, partition = spec.get("topic"), spec.get("partition")
    if partition is not None:
        partition = _int(spec, "partition", 0)
        if topic is None:
            raise FaultSpecError("a partition needs its topic")
    if topic is not None and kind not in _WRITE_ERRORS and (api is None or not names_topics(api.key)):
        raise FaultSpecError(f"{api.name if api else 'a fault without an API'} cannot be aimed at a topic")
    fault = Fault(fault_id, kind, api.name if api else None, count, topic, partition)
    if kind == FaultKind.ERROR:
        if api is None or not has_error_response(api.key):
            raise FaultSpecError(f"an error fault needs an API that has an error response, got {api_text!r}")
        fault.error = _error_code(spec.get("error")).name.upper()
    elif "error" in spec:
        raise FaultSpecError("only an error fault takes an error")
    if kind == FaultKind.DELAY:
        fault.delay_ms = _int(spec, "delay_ms", 0)
        if not 0 < fault.delay_ms <= _MAX_DELAY_MS:
            raise FaultSpecError(f"delay_ms must be between 1 and {_MAX_DELAY_MS}")
    elif "delay_ms" in spec:
        raise FaultSpecError("only a delay fault takes delay_ms")
    return fault


def _int(spec: dict[str, Any], key: str, default: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultSpecError(f"{key} must be an integer, got {value!r}")
    return value


def _error_code(value: Any) -> ErrorCode:
    try:
        code = ErrorCode(value) if isinstance(value, int) else ErrorCode[str(value).lower()]
    except (KeyError, ValueError):
        raise FaultSpecError(f"unknown error code {value!r}: use Kafka's name or number") from None
    if code is ErrorCode.none:
        raise FaultSpecError("an error fault needs an error other than NONE")
    return code


class Faults:
    """The faults set. It needs the logs (to fail their writes, and to name a topic
    asked for by id) and the metrics (to count injections), nothing else."""

    def __init__(self, logs: LogManager, metrics: Metrics) -> None:
        self.logs = logs
        self.metrics = metrics
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self.armed = False  # what the request path tests: anything set at all

    def add(self, spec: dict[str, Any]) -> Fault:
        fault = parse_fault(spec, next(self._ids))
        self._faults.append(fault)
        self._arm()
        log.info("fault set", **fault.describe())
        return fault

    def remove(self, fault_id: int) -> bool:
        before = len(self._faults)
        self._faults = [f for f in self._faults if f.id != fault_id]
        self._arm()
        return len(self._faults) < before

    def clear(self) -> None:
        self._faults = []
        self._arm()

    def _arm(self) -> None:
        """Point the request path and the logs' writes at the faults set, so that with
        none set each costs one test."""
        self.armed = any(f.kind not in _WRITE_ERRORS for f in self._faults)
        disk = any(f.kind in _WRITE_ERRORS for f in self._faults)
        self.logs.set_write_check(self._check_write if disk else None)

    def _check_write(self, topic: str, partition: int) -> None:
        """Fail this write (EIO, or ENOSPC for disk_full) if a disk fault aims at its partition."""
        for fault in self._faults:
            if fault.kind not in _WRITE_ERRORS or fault.topic not in (None, topic) or \
                    fault.partition not in (None, partition):
                continue
            fault.remaining -= 1
            if fault.remaining == 0:
                self.remove(fault.id)
            self.metrics.faults_injected[(fault.kind, "write")] += 1
            log.warning("fault injected", fault=fault.id, kind=fault.kind, topic=topic, partition=partition,
                        remaining=fault.remaining)
            raise OSError(*_WRITE_ERRORS[fault.kind])

    def active(self) -> list[Fault]:
        return list(self._faults)

    @property
    def remaining(self) -> int:
        return sum(f.remaining for f in self._faults)

    def take(self, ctx: Exchange, request: Any) -> Fault | None:
        """The fault this request meets, if any; it is used up by one."""
        api = SUPPORTED[ctx.header.api_key].name
        for fault in self._faults:
            if fault.kind in _WRITE_ERRORS or fault.api not in (None, api) or \
                    not self._aims_at(fault, ctx.header.api_key, request):
                continue
            fault.remaining -= 1
            if fault.remaining == 0:
                self.remove(fault.id)
            self.metrics.faults_injected[(fault.kind, api)] += 1
            log.warning("fault injected", fault=fault.id, kind=fault.kind, api=api, error=fault.error,
                        delay_ms=fault.delay_ms, topic=fault.topic, partition=fault.partition,
                        client_id=ctx.header.client_id, peer=ctx.peer, remaining=fault.remaining)
            return fault
        return None

    def _aims_at(self, fault: Fault, api_key: int, request: Any) -> bool:
        if fault.topic is None:
            return True
        for topic, partitions in named_partitions(api_key, request).items():
            if isinstance(topic, uuid.UUID):
                found = self.logs.topic_by_id(topic)
                name = found.name if found is not None else None
            else:
                name = topic
            if name == fault.topic and (fault.partition is None or partitions is None
                                         or fault.partition in partitions):
                return True
        return False

    def error_response(self, fault: Fault, ctx: Exchange, request: Any) -> Any:
        assert fault.error is not None, "an error fault names its error"
        return ctx.entity(error_response(ctx.header.api_key, request, ErrorCode[fault.error.lower()]))

    async def before_response(self, fault: Fault, close: Callable[[], None]) -> bool:
        """Apply `fault` between handling a request and answering it. False when the
        response must not be sent; `close` closes the client's connection."""
        if fault.kind == FaultKind.DELAY:
            await asyncio.sleep((fault.delay_ms or 0) / 1000)
        elif fault.kind == FaultKind.DROP:
            return False
        elif fault.kind == FaultKind.CLOSE:
            close()
            return False
        return True
