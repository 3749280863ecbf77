"""The registry's state, read from the compacted topic `_schemas`, and the records
that change it, in Confluent's key/value format (JSON keys and values, as Confluent's
KafkaStore writes them):

    {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
        {"subject":S,"version":V,"id":I,"schema":TEXT,"deleted":false}
        (+ "schemaType" unless AVRO, + "references" when there are some); a tombstone
        deletes the version for good
    {"keytype":"CONFIG","subject":S or null,"magic":0}      {"compatibilityLevel":L, "normalize":B}
    {"keytype":"MODE","subject":S or null,"magic":0}        {"mode":M}
    {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}      {"subject":S,"version":V}
    {"keytype":"NOOP","magic":0}

The topic is the only truth: the registry appends a record and then reads the topic
forward to its end, applying what it finds, so memory never runs ahead of the log and
a restart (or a kill -9) rebuilds exactly what clients were told. Records a client
produced to `_schemas` (a copy of another registry's topic) are read the same way.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from ottla.broker.logging import get_logger
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.protocol.errors import KafkaError
from ottla.protocol.records import keys_and_values
from ottla.storage.log_manager import LogManager

from .errors import store_error
from .schema_types import AVRO, Reference, SchemaText

TOPIC = "_schemas"
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
MAX_INT32 = 2**31 - 1

log = get_logger("ottla.schema_registry")

Key = dict[str, object]
Value = dict[str, object] | None


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    subject: str
    version: int
    schema_id: int
    schema: SchemaText
    deleted: bool = False


@dataclass
class RegistryState:
    versions: dict[str, dict[int, SchemaVersion]] = field(default_factory=dict)  # subject -> version -> ...
    configs: dict[str | None, dict[str, object]] = field(default_factory=dict)  # None: the global config
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    # id -> its schema and how many versions (soft-deleted ones too) hold it; an id no
    # version holds any more (all deleted for good) is not found.
    _by_id: dict[int, tuple[SchemaText, int]] = field(default_factory=dict)
    _ids: dict[SchemaText, int] = field(default_factory=dict)

    def schema_by_id(self, schema_id: int) -> SchemaText | None:
        found = self._by_id.get(schema_id)
        return found[0] if found is not None else None

    def id_of(self, schema: SchemaText) -> int | None:
        return self._ids.get(schema)

    def _hold(self, entry: SchemaVersion) -> None:
        schema, count = self._by_id.get(entry.schema_id, (entry.schema, 0))
        self._by_id[entry.schema_id] = (schema, count + 1)
        self._ids.setdefault(entry.schema, entry.schema_id)

    def _release(self, entry: SchemaVersion) -> None:
        schema, count = self._by_id.get(entry.schema_id, (entry.schema, 1))
        if count > 1:
            self._by_id[entry.schema_id] = (schema, count - 1)
            return
        self._by_id.pop(entry.schema_id, None)
        if self._ids.get(schema) == entry.schema_id:
            del self._ids[schema]

    def apply(self, key: Key, value: Value) -> None:
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == "SCHEMA" and isinstance(subject, str) and isinstance(key.get("version"), int):
            version = _int32(key["version"], "version")
            entry = _schema_version(value) if value is not None else None  # before any change: it may be refused
            versions = self.versions.setdefault(subject, {})
            previous = versions.pop(version, None)
            if previous is not None:
                self._release(previous)
            if entry is None:
                if not versions:
                    del self.versions[subject]
                return
            versions[version] = entry
            self._hold(entry)
            self.max_id = max(self.max_id, entry.schema_id)
        elif keytype == "CONFIG" and (subject is None or isinstance(subject, str)):
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = dict(value)
        elif keytype == "MODE" and (subject is None or isinstance(subject, str)):
            if value is None or not isinstance(value.get("mode"), str):
                self.modes.pop(subject, None)
            else:
                self.modes[subject] = str(value["mode"])
        elif keytype == "DELETE_SUBJECT" and isinstance(subject, str) and value is not None:
            upto = value.get("version")
            for version, entry in list(self.versions.get(subject, {}).items()):
                if isinstance(upto, int) and version <= upto:
                    self.versions[subject][version] = replace(entry, deleted=True)


def _schema_version(value: dict[str, object]) -> SchemaVersion:
    references = tuple(Reference(str(r["name"]), str(r["subject"]), _int32(r["version"], "a reference's version"))
                       for r in value.get("references") or ())  # type: ignore[attr-defined]
    schema = SchemaText(str(value.get("schemaType") or AVRO), str(value["schema"]), references)
    return SchemaVersion(str(value["subject"]), _int32(value["version"], "version"), _int32(value["id"], "id"),
                         schema, bool(value.get("deleted", False)))


def _int32(value: object, what: str) -> int:
    """An id or a version: an integer 1..2^31-1, as Confluent's reader takes them."""
    if type(value) is not int or not 1 <= value <= MAX_INT32:
        raise ValueError(f"{what} {str(value)[:40]} is not an integer between 1 and 2^31-1")
    return value


def schema_key(subject: str, version: int) -> Key:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def schema_value(entry: SchemaVersion) -> dict[str, object]:
    value: dict[str, object] = {"subject": entry.subject, "version": entry.version, "id": entry.schema_id}
    if entry.schema.schema_type != AVRO:
        value["schemaType"] = entry.schema.schema_type
    if entry.schema.references:
        value["references"] = [r.to_json() for r in entry.schema.references]
    value["schema"] = entry.schema.text
    value["deleted"] = entry.deleted
    return value


def config_key(subject: str | None) -> Key:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> Key:
    return {"keytype": "MODE", "subject": subject, "magic": 0}


def delete_subject_key(subject: str) -> Key:
    return {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}


def _encode(document: dict[str, object]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


class UnusableTopic(Exception):
    """`_schemas` exists but cannot hold the registry's state: the broker does not start."""


class SchemaStore:
    """The `_schemas` log and the state read from it."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.state = RegistryState()
        self._next_offset = 0

    def open(self) -> None:
        """Create `_schemas` on first use, keep it from clients as an internal topic (only
        the registry writes it), and read it to its end. A `_schemas` made while the
        registry was off that is not compacted only (cleanup.policy=compact, as
        Confluent's registry requires) stops the start: retention would delete old
        versions, and with them schemas clients still decode with."""
        topic = self.logs.topic(TOPIC)
        if topic is None:
            self.logs.create_topic(TOPIC, 1, TOPIC_CONFIGS)
            log.info("topic created", topic=TOPIC, partitions=1, configs=TOPIC_CONFIGS)
        elif not topic.config.compact or topic.config.delete:
            raise UnusableTopic(f"the topic {TOPIC} holds the schema registry's state but is not compacted only "
                                f"(cleanup.policy={','.join(topic.config.cleanup_policy)}): start the broker "
                                f"without schema.registry.listeners, set cleanup.policy=compact on {TOPIC} "
                                f"(ottla configs, kafka-configs), then start it with the registry again")
        self.logs.add_internal_topic(TOPIC)
        self.catch_up()
        subjects = len(self.state.versions)
        log.info("schema registry loaded", subjects=subjects, max_id=self.state.max_id)

    def catch_up(self) -> None:
        """Apply every record appended since the last call."""
        partition = self.logs.partition(TOPIC, 0)
        if partition is None:
            return
        start = max(self._next_offset, partition.log_start_offset)
        for header, batch in partition.batches(start):
            self._next_offset = header.last_offset + 1
            if header.is_control:
                continue
            for offset, key, value in keys_and_values(batch):
                self._apply_record(offset, key, value)

    def _apply_record(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        try:
            decoded_key = json.loads(key) if key is not None else None
            decoded_value = json.loads(value) if value is not None else None
            if not isinstance(decoded_key, dict) or not (decoded_value is None or isinstance(decoded_value, dict)):
                raise ValueError("not a JSON object")
            self.state.apply(decoded_key, decoded_value)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
            # A record no registry wrote (nested past the parser's depth, an id of 1e999...)
            # costs only itself, as Confluent's reader skips what it cannot deserialize.
            log.warning("skipped a record of _schemas it cannot read", offset=offset, error=type(exc).__name__,
                        reason=str(exc)[:200], key=(key or b"")[:200].decode(errors="replace"))

    def write(self, records: list[tuple[Key, Value]]) -> None:
        """Append `records` in one batch, then read them back into the state."""
        partition = self.logs.partition(TOPIC, 0)
        if partition is None:
            raise store_error(f"the topic {TOPIC} does not exist")
        encoded = [encode_record(_encode(key), None if value is None else _encode(value), offset_delta=i)
                   for i, (key, value) in enumerate(records)]
        batch = build_batch(encoded, timestamp=int(time.time() * 1000))
        try:
            partition.append_batch(batch, BatchHeader.parse(batch))
        except KafkaError as exc:
            raise store_error(f"{TOPIC} refused the write: {exc.code.name}") from None
        self.catch_up()
