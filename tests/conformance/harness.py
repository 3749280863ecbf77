"""Run a scenario of raw requests against a broker, and compare two runs field by field.

A scenario is a list of `Step`s: a name, an API key and version, and a request body as
plain values (the keyword arguments of `protocol.entities.make`, so one body serves every
version: a field a version lacks is dropped). A body may be a function of the `Context`,
which gives the scenario's unique topic names and earlier steps' answers (a producer id,
a member id, a generation), each broker's own. A step may also send raw bytes instead.

`run` sends every step on one connection (a new one after the broker closes it) and
turns each answer into a plain tree (`plain`); `normalise` replaces what legitimately
differs between two brokers (see NORMALISED); `compare` walks the two trees and yields
one `Difference` per field that differs.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from ottla.protocol.apis import SUPPORTED
from ottla.protocol.batch import HEADER, HEADER_SIZE, iter_records
from ottla.protocol.codec import decode_response, encode_request, request_class
from ottla.protocol.entities import make
from ottla.tools.client import recv_exactly

ABSENT = "<absent>"
CLIENT_ID = "conformance"


class Context:
    """What a step's body may refer to: the run's unique names and earlier answers."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.answers: dict[str, Any] = {}

    def topic(self, suffix: str = "") -> str:
        return f"cf-{self.run_id}{'-' + suffix if suffix else ''}"

    def name(self, kind: str, suffix: str = "") -> str:
        """A unique name of another kind (a group, a transactional id...)."""
        return f"cf-{kind}-{self.run_id}{'-' + suffix if suffix else ''}"

    def __getitem__(self, step: str) -> Any:
        """An earlier step's decoded answer (the kio entity)."""
        return self.answers[step]


Body = dict[str, Any] | Callable[[Context], dict[str, Any]]


@dataclass
class Step:
    name: str
    api: int
    version: int
    body: Body | None = None
    # Bytes sent as the request's body instead of an encoded `body` (malformed input).
    raw: bytes | Callable[[Context], bytes] | None = None
    # acks=0: no answer is expected.
    expect_answer: bool = True
    # Seconds to wait before sending (a transaction timing out), on both brokers alike.
    wait: float = 0.0
    # Not compared: steps that only set up state whose answers differ for known reasons
    # elsewhere (rarely used; every use says why).
    compare: bool = True
    # Error codes (names) that mean "not yet" on either broker: the step is sent again
    # until its answer has none of them (Kafka creates its coordinators' topics, and
    # loads them, a moment after the first request that needs them).
    retry: tuple[str, ...] = ()
    # Sent again, the same way, until this holds of its (plain) answer: a change Kafka
    # applies a moment after acknowledging it (ACLs go through its metadata log).
    until: Callable[[Any], bool] | None = None
    # A listing of the whole broker (ListTransactions, ListGroups): only the entries of
    # this run are compared (Kafka serves the whole session's tests).
    only_mine: bool = False
    # The connection the step goes on: each name is a connection of its own (the SASL
    # scenarios authenticate one per user).
    user: str = ""


@dataclass
class Scenario:
    name: str
    steps: list[Step]
    doc: str = ""
    # Run against the brokers with SASL and ACLs (tests/conformance/secured.py).
    secured: bool = False


@dataclass(frozen=True)
class Difference:
    scenario: str
    step: str
    api: int
    version: int
    path: str
    ottla: Any
    kafka: Any

    def __str__(self) -> str:
        api = SUPPORTED[self.api].name if self.api in SUPPORTED else str(self.api)
        return (f"{self.scenario}/{self.step} {api} v{self.version} {self.path}: "
                f"ottla={self.ottla!r} kafka={self.kafka!r}")


def sweep(name: str, api: int, body: Body, versions: range | None = None, **options: Any) -> list[Step]:
    """The same request at every version Ottla serves (or `versions`)."""
    if versions is None:
        served = SUPPORTED[api]
        versions = range(served.min_version, served.max_version + 1)
    return [Step(f"{name}@v{v}", api, v, body, **options) for v in versions]


# --- running ------------------------------------------------------------------------------


class _Connection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def _socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=30)
        return self.sock

    def exchange(self, api: int, version: int, payload: bytes, expect_answer: bool) -> bytes | None:
        """Send one framed request; its answer's frame (after the correlation id), or None
        if the broker closed the connection instead of answering."""
        self.correlation_id += 1
        sock = self._socket()
        try:
            sock.sendall(payload)
            if not expect_answer:
                return b""
            size = struct.unpack(">i", recv_exactly(sock, 4))[0]
            return recv_exactly(sock, size)
        except (ConnectionError, OSError, EOFError):
            self.close()
            return None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _frame_raw(api: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client = CLIENT_ID.encode()
    header = struct.pack(">hhih", api, version, correlation_id, len(client)) + client
    cls = request_class(api, version)
    if cls is not None and cls.__flexible__:
        header += b"\x00"  # no tagged fields in the header
    message = header + body
    return struct.pack(">i", len(message)) + message


def run(bootstrap: str, scenario: Scenario, run_id: str) -> list[tuple[Step, Any]]:
    """Every step's answer as a plain tree (see `plain`): {"closed": True} when the
    broker closed the connection instead of answering."""
    context = Context(run_id)
    connections: dict[str, _Connection] = {}
    answers: list[tuple[Step, Any]] = []
    try:
        for step in scenario.steps:
            connection = connections.setdefault(step.user, _Connection(bootstrap))
            if step.wait:
                time.sleep(step.wait)
            correlation_id = connection.correlation_id + 1
            values: dict[str, Any] = {}
            if step.raw is not None:
                raw = step.raw(context) if callable(step.raw) else step.raw
                payload = _frame_raw(step.api, step.version, correlation_id, raw)
            else:
                cls = request_class(step.api, step.version)
                assert cls is not None, f"kio has no {step.api} v{step.version}"
                values = step.body(context) if callable(step.body) else (step.body or {})
                payload = encode_request(correlation_id, CLIENT_ID, make(cls, **values))
            frame = connection.exchange(step.api, step.version, payload, step.expect_answer)
            for _ in range(RETRIES if step.retry or step.until else 0):
                if frame is None:
                    break
                answer = plain(_decode_quietly(step, frame))
                if not _has_error(answer, step.retry) and (step.until is None or step.until(answer)):
                    break
                time.sleep(0.1)
                payload = encode_request(connection.correlation_id + 1, CLIENT_ID,
                                         make(request_class(step.api, step.version), **values))
                frame = connection.exchange(step.api, step.version, payload, step.expect_answer)
            if frame is None:
                answers.append((step, {"closed": True}))
                continue
            if not step.expect_answer:
                answers.append((step, {"answered": False}))
                continue
            tree = _decode(step, frame, context)
            answers.append((step, _mine(tree, context.run_id) if step.only_mine else tree))
            if (step.api in (CREATE_TOPICS, CREATE_PARTITIONS) and step.name in context.answers
                    and not values.get("validate_only")):
                _settle(connection, context.answers[step.name])
    finally:
        for connection in connections.values():
            connection.close()
    return answers


RETRIES = 300
_NAMED = ("transactional_id", "group_id", "name", "user", "resource_name")


def _mine(tree: Any, run_id: str) -> Any:
    if isinstance(tree, dict):
        return {k: _mine(v, run_id) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_mine(item, run_id) for item in tree
                if not (isinstance(item, dict) and any(isinstance(item.get(k), str) and run_id not in item[k]
                                                       for k in _NAMED))]
    return tree


def _decode_quietly(step: Step, frame: bytes) -> Any:
    try:
        return decode_response(step.api, step.version, frame)[1]
    except Exception:  # undecodable: nothing to retry on
        return None


def _has_error(tree: Any, names: tuple[str, ...]) -> bool:
    if isinstance(tree, dict):
        return any(k.endswith("error_code") and v in names for k, v in tree.items()) or any(
            _has_error(v, names) for v in tree.values())
    if isinstance(tree, list):
        return any(_has_error(v, names) for v in tree)
    return False


CREATE_TOPICS, CREATE_PARTITIONS, METADATA, LIST_OFFSETS = 19, 37, 3, 2
SETTLE_TRIES = 200


def _settle(connection: _Connection, answer: Any) -> None:
    """Wait until the topics just created (or grown) have a leader for every partition.
    Kafka's controller hands them to the broker a moment after answering, and a request
    in between gets NOT_LEADER_OR_FOLLOWER: a race of Kafka's, not an answer to compare."""
    names = [t.name for t in answer.results if t.error_code == 0] if hasattr(answer, "results") else \
        [t.name for t in answer.topics if t.error_code == 0]
    if not names or getattr(answer, "__version__", 0) < 0:
        return
    partitions: dict[str, int] = {}
    for _ in range(SETTLE_TRIES):
        metadata = _call(connection, METADATA, 12, topics=[{"name": n} for n in names],
                         allow_auto_topic_creation=False)
        if metadata is not None and all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in
                                                                                   t.partitions)
                                        for t in metadata.topics):
            partitions = {t.name: len(t.partitions) for t in metadata.topics}
            break
        time.sleep(0.05)
    # The metadata cache knows the leader a moment before the partition serves requests.
    for _ in range(SETTLE_TRIES):
        offsets = _call(connection, LIST_OFFSETS, 1, replica_id=-1, topics=[
            {"name": name, "partitions": [{"partition_index": i, "timestamp": -1} for i in range(count)]}
            for name, count in partitions.items()])
        if offsets is not None and all(p.error_code == 0 for t in offsets.topics for p in t.partitions):
            return
        time.sleep(0.05)


def _call(connection: _Connection, api: int, version: int, **values: Any) -> Any:
    cls = request_class(api, version)
    assert cls is not None
    frame = connection.exchange(api, version, encode_request(connection.correlation_id + 1, CLIENT_ID,
                                                             make(cls, **values)), True)
    return None if frame is None else decode_response(api, version, frame)[1]


def _decode(step: Step, frame: bytes, context: Context) -> Any:
    # ApiVersions answers an unsupported version with a v0 body (KIP-511).
    versions = [step.version] + ([0] if step.api == 18 else [])
    for version in versions:
        try:
            _correlation, body = decode_response(step.api, version, frame)
        except Exception:  # the next version, or undecodable below
            continue
        context.answers[step.name] = body
        tree = plain(body)
        if version != step.version:
            tree = {"answered_as_version": version, **tree}
        return tree
    return {"undecodable": frame.hex()}


# --- plain trees --------------------------------------------------------------------------


def plain(value: Any, name: str = "") -> Any:
    """A kio entity as dicts, lists, ints, strings and bytes; record data as batches."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), f.name) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [plain(item, name) for item in value]
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (bytes, bytearray, memoryview)) and name == "records":
        return batches(bytes(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)  # kio's i32/i64 NewTypes
    if isinstance(value, str):
        return str(value)
    return value


BATCH_FIELDS = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
                "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                "base_sequence", "record_count")


def batches(data: bytes) -> list[dict[str, Any]]:
    out = []
    position = 0
    while position + HEADER_SIZE <= len(data):
        header = dict(zip(BATCH_FIELDS, HEADER.unpack_from(data, position), strict=True))
        end = position + 12 + header["batch_length"]
        if end > len(data):
            out.append({"partial_batch_bytes": len(data) - position})
            break
        batch = data[position:end]
        header["records"] = [{"offset": r.offset, "key": r.key, "value": r.value, "headers": list(r.headers)}
                             for r in iter_records(batch)]
        out.append(header)
        position = end
    return out


# --- normalising ---------------------------------------------------------------------------

# Fields whose values are each broker's own: replaced by the order in which each value
# first appears in the run (so "the same producer id twice" still compares).
ALIASED = {"producer_id", "topic_id", "member_id", "session_id", "incarnation_id", "cluster_id"}
# Fields that hold values of an aliased field under another name.
SAME_AS = {"leader": "member_id"}
# Fields holding the broker's node id (Ottla's is its own, Kafka's reference is 1).
NODE_FIELDS = {"node_id", "leader_id", "broker_id", "controller_id", "replica_nodes", "isr_nodes",
               "coordinator_id", "replicas", "isr", "preferred_leader"}
# Not compared at all: throttle times (quota state), human-readable messages (no client
# acts on their wording; Kafka's text is its own, Ottla's its own), host and port.
DROPPED = {"throttle_time_ms", "throttle_time", "error_message", "host", "port", "message", "rack",
           # Each broker's own disk: its path and sizes.
           "log_dir", "total_bytes", "usable_bytes"}
# Times the broker sets itself: compared only as "a time" or "none".
BROKER_TIMES = {"log_append_time", "transaction_start_time", "transaction_start_time_ms", "finalized_features_epoch"}
# Lists whose order no client relies on: compared as sets keyed by the first of these
# fields their entries have.
LIST_KEYS = ("api_key", "name", "topic_name", "resource_name", "partition_index", "partition", "group_id",
             "transactional_id", "config_name", "producer_id", "index", "topic", "broker_id",
             "member_id", "node_id", "user")


class Normaliser:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.aliases: dict[str, dict[Any, str]] = {}

    def alias(self, name: str, value: Any) -> Any:
        if value in (None, -1, "", "00000000-0000-0000-0000-000000000000") or (name == "session_id" and value == 0):
            return value
        seen = self.aliases.setdefault(name, {})
        return seen.setdefault(value, f"<{name}#{len(seen) + 1}>")

    def node(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.node(v) for v in value]
        return "<node>" if value == self.node_id else value

    def __call__(self, tree: Any, name: str = "") -> Any:
        if isinstance(tree, dict):
            out = {}
            # An entry that answers an error carries the schema's defaults (a producer id
            # of 0...), compared as they are.
            errored = tree.get("error_code") not in (None, "none")
            for key, value in tree.items():
                if key in DROPPED:
                    continue
                if key in ALIASED and not isinstance(value, (dict, list)) and not (errored and key == "producer_id"):
                    out[key] = self.alias(key, value)
                elif key in SAME_AS:
                    out[key] = self.alias(SAME_AS[key], value)
                elif key in NODE_FIELDS and not isinstance(value, dict):
                    out[key] = self.node(value)
                elif key in BROKER_TIMES and isinstance(value, int):
                    out[key] = "<time>" if value >= 0 else value
                else:
                    out[key] = self(value, key)
            if name == "records" or "record_count" in out:
                self._batch(out)
            return out
        if isinstance(tree, list):
            items = [self(item, name) for item in tree]
            return items if name == "records" else keyed(items)  # batches keep their log order
        return tree

    def _batch(self, batch: dict[str, Any]) -> None:
        # The CRC covers the producer id, which each broker allocates.
        if isinstance(batch.get("producer_id"), str):
            batch["crc"] = "<crc>"
        # A control batch (a transaction marker) carries the time the broker wrote it.
        if isinstance(batch.get("attributes"), int) and batch["attributes"] & 0x20:
            batch["base_timestamp"] = batch["max_timestamp"] = "<time>"
            batch["crc"] = "<crc>"
            records = batch.get("records", [])
            for record in records.values() if isinstance(records, dict) else records:
                if isinstance(record.get("value"), bytes) and len(record["value"]) >= 6:
                    # ControlRecordType value: version, coordinator epoch.
                    record["value"] = record["value"][:2] + b"<epoch>"


def keyed(items: list[Any]) -> Any:
    if not items or not all(isinstance(i, dict) for i in items):
        return items
    for key in LIST_KEYS:
        if all(key in i for i in items):
            values = [repr(i[key]) for i in items]
            if len(set(values)) == len(values):
                return {f"[{key}={v}]": i for v, i in zip(values, items, strict=True)}
            return items
    return items


# --- comparing -----------------------------------------------------------------------------


def compare(ottla: Any, kafka: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(ottla, dict) and isinstance(kafka, dict):
        for key in list(ottla) + [k for k in kafka if k not in ottla]:
            sub = f"{path}{key}" if key.startswith("[") else f"{path}.{key}" if path else key
            yield from compare(ottla.get(key, ABSENT), kafka.get(key, ABSENT), sub)
    elif isinstance(ottla, list) and isinstance(kafka, list) and len(ottla) == len(kafka):
        for index, (a, b) in enumerate(zip(ottla, kafka, strict=True)):
            yield from compare(a, b, f"{path}[{index}]")
    elif ottla != kafka:
        yield path, _short(ottla), _short(kafka)


def _short(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        text = repr(value)
        return text if len(text) <= 300 else text[:300] + "..."
    return value


def differences(scenario: Scenario, ottla: list[tuple[Step, Any]], kafka: list[tuple[Step, Any]],
                ottla_node: int, kafka_node: int) -> list[Difference]:
    left, right = Normaliser(ottla_node), Normaliser(kafka_node)
    found = []
    for (step, a), (_, b) in zip(ottla, kafka, strict=False):  # a scenario cut short on one broker
        a, b = left(a), right(b)
        if not step.compare:
            continue
        for path, ottla_value, kafka_value in compare(a, b):
            found.append(Difference(scenario.name, step.name, step.api, step.version, path or "<answer>",
                                    ottla_value, kafka_value))
    return found


@dataclass
class Observed:
    """What one scenario gave: its differences, and which (api, version) it exercised."""

    scenario: str
    differences: list[Difference] = field(default_factory=list)
    exercised: set[tuple[int, int]] = field(default_factory=set)
