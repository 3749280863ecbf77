"""`ottla dump-log FILE...`: a partition's files printed as Kafka's
`kafka-dump-log.sh --print-data-log` prints them, field for field, so output can be
compared with Kafka's line by line.

    .log        one line per batch, then one `| `-prefixed line per record, with the
                key and payload as UTF-8 text (or decoded, see below) and the
                `endTxnMarker` of a control record; compressed batches are decompressed
    .index      `offset: N position: P` per entry
    .timeindex  `timestamp: T offset: N` per entry
    .txnindex   one line per aborted transaction
    .snapshot   one line per producer

Records of the internal topics are decoded when the file lives in a
`__transaction_state-N` or `__consumer_offsets-N` directory, or when the decoder is
asked for (Kafka's `--transaction-log-decoder` / `--offsets-decoder`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TextIO

from ottla.coordinator import consumer_group_records, offsets_log, streams_group_records, transaction_log
from ottla.protocol.batch import (
    COMPRESSION_NAMES,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    OFFSET_AND_LENGTH,
    TIMESTAMP_TYPE_FLAG,
    BatchHeader,
    crc_is_valid,
    iter_records,
)
from ottla.protocol.control import parse_marker
from ottla.storage.index import read_offset_index_file, read_time_index_file
from ottla.storage.producer_state import read_snapshot_file
from ottla.storage.txn_index import VERSION as TXN_INDEX_VERSION
from ottla.storage.txn_index import read_txn_index_file

from .progress import Progress

# A record's key and value as the texts printed after `key:` and `payload:`; None
# leaves the field out, as Kafka's parsers do.
RecordParser = Callable[[bytes | None, bytes | None], tuple[str | None, str | None]]

TRANSACTION_LOG_DECODER = "transaction-log"
OFFSETS_DECODER = "offsets"


def dump_files(paths: Iterable[str], out: TextIO, decoder: str | None = None) -> None:
    """Print each file by its kind (its suffix). `decoder` forces a record decoder for
    `.log` files; by default it follows the partition directory's topic."""
    for path in paths:
        out.write(f"Dumping {path}\n")
        suffix = os.path.splitext(path)[1]
        if suffix == ".log":
            dump_log_segment(path, out, _RECORD_PARSERS[decoder or _topic_decoder(path)])
        elif suffix == ".index":
            dump_offset_index(path, out)
        elif suffix == ".timeindex":
            dump_time_index(path, out)
        elif suffix == ".txnindex":
            dump_txn_index(path, out)
        elif suffix == ".snapshot":
            dump_snapshot(path, out)
        else:
            out.write(f"Ignoring unknown file {path}\n")


def _base_offset(path: str) -> int:
    name = os.path.basename(path).split(".")[0]
    if not name.isdigit():
        raise ValueError(f"{path} is not named after a base offset (20 digits, as Kafka names segment files)")
    return int(name)


def _topic_decoder(path: str) -> str | None:
    directory = os.path.basename(os.path.dirname(os.path.abspath(path)))
    topic = directory.rpartition("-")[0]
    return {transaction_log.TOPIC: TRANSACTION_LOG_DECODER, offsets_log.TOPIC: OFFSETS_DECODER}.get(topic)


# --- .log ------------------------------------------------------------------------------


def dump_log_segment(path: str, out: TextIO, parse_record: RecordParser) -> None:
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    position = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        progress = Progress(f"dumping {os.path.basename(path)}", size, "bytes", data_on_stdout=True)
        while position + HEADER_SIZE <= size:
            head = f.read(LOG_OVERHEAD)
            _, length = OFFSET_AND_LENGTH.unpack(head)
            # Ottla stores only v2 batches, so a shorter length (or a batch running past the
            # end) is a torn or damaged tail: reported below as Kafka reports it.
            if length < HEADER_SIZE - LOG_OVERHEAD or position + LOG_OVERHEAD + length > size:
                break
            batch = head + f.read(length)
            _dump_batch(BatchHeader.parse(batch), batch, position, out, parse_record)
            position += len(batch)
            progress.update(position)
        progress.close()
    if position < size:
        out.write(f"Found {size - position} invalid bytes at the end of {os.path.basename(path)}\n")


def _dump_batch(header: BatchHeader, batch: bytes, position: int, out: TextIO, parse_record: RecordParser) -> None:
    timestamp_type = "LogAppendTime" if header.attributes & TIMESTAMP_TYPE_FLAG else "CreateTime"
    # With the delete-horizon flag (set by compaction) baseTimestamp holds the horizon.
    delete_horizon = (f"OptionalLong[{header.base_timestamp}]" if header.attributes & DELETE_HORIZON_FLAG
                      else "OptionalLong.empty")
    out.write(
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.record_count} "
        f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
        f"deleteHorizonMs: {delete_horizon} position: {position} {timestamp_type}: {header.max_timestamp} "
        f"size: {header.size} magic: {header.magic} "
        f"compresscodec: {COMPRESSION_NAMES.get(header.compression, header.compression)} "
        f"crc: {header.crc} isvalid: {_bool(crc_is_valid(batch, header))}\n"
    )
    try:
        for record in iter_records(batch):
            # Records of a LogAppendTime batch all take the batch's timestamp, as in Kafka.
            timestamp = header.max_timestamp if timestamp_type == "LogAppendTime" else record.timestamp
            line = (
                f"| offset: {record.offset} {timestamp_type}: {timestamp} keySize: {_size(record.key)} "
                f"valueSize: {_size(record.value)} sequence: {record.sequence} "
                f"headerKeys: [{','.join(name for name, _ in record.headers)}]"
            )
            if header.is_control:
                marker = parse_marker(batch)
                line += f" endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
            else:
                key, payload = parse_record(record.key, record.value)
                if key is not None:
                    line += f" key: {key}"
                if payload is not None:
                    line += f" payload: {payload}"
            out.write(line + "\n")
    except Exception as exc:  # a damaged batch (isvalid: false) must not stop the dump
        out.write(f"| records could not be decoded: {type(exc).__name__}: {exc}\n")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _size(field: bytes | None) -> int:
    return -1 if field is None else len(field)


# --- record parsers --------------------------------------------------------------------


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def parse_string_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """Kafka's default: key and value as UTF-8 text."""
    return _text(key), _text(value)


def parse_transaction_log_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """The transactional id, and its state in the format of Kafka's TransactionMetadata
    (`TEST-1::TransactionMetadata(...)` lines); `<DELETE>` for a tombstone."""
    txn_id = transaction_log.decode_key(key or b"")
    if value is None:
        return txn_id, "<DELETE>"
    txn = transaction_log.decode_value(value)
    partitions = ", ".join(f"{topic}-{partition}" for topic, partition in sorted(txn.partitions))
    # pendingState is the coordinator's in-memory transition, never in the log: None.
    return txn_id, (
        f"TransactionMetadata(transactionalId={txn_id}, producerId={txn.producer_id}, "
        f"producerEpoch={txn.producer_epoch}, txnTimeoutMs={txn.timeout_ms}, state={txn.state.kafka_name}, "
        f"pendingState=None, topicPartitions=Set({partitions}), txnStartTimestamp={txn.start_ms}, "
        f"txnLastUpdateTimestamp={txn.last_update_ms})"
    )


def parse_offsets_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """Kafka's offsets decoder: `offset::group:topic:partition` -> `offset[:metadata]`,
    `metadata::group` -> `protocolType:protocol:generation:{member=assignment hex}`."""
    decoded = None if key is None else offsets_log.decode_key(key)
    if isinstance(decoded, offsets_log.OffsetKey):
        text_key = f"offset::{decoded.group}:{decoded.topic}:{decoded.partition}"
        if value is None:
            return text_key, "<DELETE>"
        committed = offsets_log.decode_offset_value(value)
        suffix = f":{committed.metadata}" if committed.metadata else ""
        return text_key, f"{committed.offset}{suffix}"
    if isinstance(decoded, offsets_log.GroupKey):
        text_key = f"metadata::{decoded.group}"
        if value is None:
            return text_key, "<DELETE>"
        group = offsets_log.decode_group_value(value)
        assignment = ",".join(f"{m.member_id}={m.assignment.hex()}" for m in group.members)
        return text_key, f"{group.protocol_type}:{group.protocol}:{group.generation}:{{{assignment}}}"
    consumer_key = None if key is None else consumer_group_records.decode_key(key)
    if consumer_key is not None:
        return _consumer_group_record(consumer_key, value)
    streams_key = None if key is None else streams_group_records.decode_key(key)
    if streams_key is not None:
        return _streams_group_record(streams_key, value)
    return "unknown", None


def _partitions(assignment: dict) -> str:
    """{topicId:[partitions]}: the records name topics by id, as Kafka's do."""
    return "{" + ",".join(f"{t}:{sorted(ps)}" for t, ps in sorted(assignment.items(), key=str)) + "}"


def _consumer_group_record(key: consumer_group_records.ConsumerGroupKey,
                           value: bytes | None) -> tuple[str, str | None]:
    """A KIP-848 consumer group's record (record types 3-8 and 16), named by its schema."""
    records = consumer_group_records
    name = {records.GROUP_METADATA: "consumer_group_metadata", records.PARTITION_METADATA: "partition_metadata",
            records.MEMBER_METADATA: "member_metadata", records.TARGET_ASSIGNMENT_METADATA: "target_assignment",
            records.TARGET_ASSIGNMENT_MEMBER: "target_assignment_member",
            records.CURRENT_MEMBER_ASSIGNMENT: "current_assignment",
            records.REGULAR_EXPRESSION: "regular_expression"}[key.type]
    text_key = f"{name}::{key.group}" + (f":{key.member}" if key.member is not None else "")
    if value is None:
        return text_key, "<DELETE>"
    if key.type in (records.GROUP_METADATA, records.TARGET_ASSIGNMENT_METADATA):
        return text_key, f"epoch={records.decode_epoch(value)}"
    if key.type == records.MEMBER_METADATA:
        m = records.decode_member_metadata(value)
        subscription = m.subscribed_topic_regex if m.subscribed_topic_regex else ",".join(m.subscribed_topic_names)
        return text_key, (f"client={m.client_id}@{m.client_host} instance={m.instance_id} "
                          f"subscription={subscription} rebalance_timeout_ms={m.rebalance_timeout_ms}")
    if key.type == records.TARGET_ASSIGNMENT_MEMBER:
        return text_key, _partitions(records.decode_target_assignment(value))
    if key.type == records.CURRENT_MEMBER_ASSIGNMENT:
        a = records.decode_current_assignment(value)
        return text_key, (f"epoch={a.member_epoch} previous_epoch={a.previous_member_epoch} state={a.state} "
                          f"assigned={_partitions(a.assigned)} revoking={_partitions(a.pending_revocation)}")
    return text_key, f"({len(value)} bytes)"  # records Ottla reads past (partition metadata, regexes)


def _tasks(tasks: streams_group_records.Tasks) -> str:
    """{subtopology:[partitions]}: one kind of a streams member's tasks."""
    return "{" + ",".join(f"{s}:{sorted(ps)}" for s, ps in sorted(tasks.items())) + "}"


def _task_kinds(a: streams_group_records.TaskAssignment, prefix: str = "") -> str:
    return f"{prefix}active={_tasks(a.active)} {prefix}standby={_tasks(a.standby)} {prefix}warmup={_tasks(a.warmup)}"


def _subtopology(s: streams_group_records.Subtopology) -> str:
    """One subtopology of a streams group's topology: the topics it reads and writes."""
    def internal(infos: tuple[streams_group_records.TopicInfo, ...]) -> str:
        return ",".join(i.name + (f"({i.partitions})" if i.partitions else "") for i in infos)

    parts = [f"sources=[{','.join(s.source_topics)}]"]
    if s.source_topic_regex:
        parts.append(f"source_regexes=[{','.join(s.source_topic_regex)}]")
    parts += [f"repartition_sources=[{internal(s.repartition_source_topics)}]",
              f"repartition_sinks=[{','.join(s.repartition_sink_topics)}]",
              f"changelogs=[{internal(s.state_changelog_topics)}]"]
    return f"{s.subtopology_id}:{{{' '.join(parts)}}}"


def _streams_group_record(key: streams_group_records.StreamsGroupKey, value: bytes | None) -> tuple[str, str | None]:
    """A KIP-1071 streams group's record (record types 17-23), named by its schema."""
    records = streams_group_records
    name = {records.GROUP_METADATA: "streams_group_metadata", records.PARTITION_METADATA: "streams_partition_metadata",
            records.MEMBER_METADATA: "streams_member_metadata",
            records.TARGET_ASSIGNMENT_METADATA: "streams_target_assignment",
            records.TARGET_ASSIGNMENT_MEMBER: "streams_target_assignment_member",
            records.CURRENT_MEMBER_ASSIGNMENT: "streams_current_assignment",
            records.TOPOLOGY: "streams_topology"}[key.type]
    text_key = f"{name}::{key.group}" + (f":{key.member}" if key.member is not None else "")
    if value is None:
        return text_key, "<DELETE>"
    if key.type == records.GROUP_METADATA:
        epoch, metadata_hash, last_configs = records.decode_group_metadata(value)
        configs = "".join(f" {k}={v}" for k, v in last_configs)  # LastAssignmentConfigs, when written
        return text_key, f"epoch={epoch} metadata_hash={metadata_hash}{configs}"
    if key.type == records.TARGET_ASSIGNMENT_METADATA:
        return text_key, f"epoch={records.decode_assignment_epoch(value)}"
    if key.type == records.MEMBER_METADATA:
        m = records.decode_member_metadata(value)
        endpoint = None if m.user_endpoint is None else f"{m.user_endpoint[0]}:{m.user_endpoint[1]}"
        tags = ",".join(f"{k}={v}" for k, v in m.client_tags)
        return text_key, (f"client={m.client_id}@{m.client_host} process={m.process_id} instance={m.instance_id} "
                          f"rack={m.rack_id} topology_epoch={m.topology_epoch} "
                          f"rebalance_timeout_ms={m.rebalance_timeout_ms} endpoint={endpoint} tags={{{tags}}}")
    if key.type == records.TARGET_ASSIGNMENT_MEMBER:
        return text_key, _task_kinds(records.decode_target_assignment(value))
    if key.type == records.CURRENT_MEMBER_ASSIGNMENT:
        a = records.decode_current_assignment(value)
        return text_key, (f"epoch={a.member_epoch} previous_epoch={a.previous_member_epoch} state={a.state} "
                          f"{_task_kinds(a.assigned)} {_task_kinds(a.pending_revocation, 'revoking_')}")
    if key.type == records.TOPOLOGY:
        t = records.decode_topology(value)
        return text_key, f"epoch={t.epoch} subtopologies=[{' '.join(_subtopology(s) for s in t.subtopologies)}]"
    return text_key, f"({len(value)} bytes)"  # partition metadata, which Ottla reads past


_RECORD_PARSERS: dict[str | None, RecordParser] = {
    None: parse_string_record,
    TRANSACTION_LOG_DECODER: parse_transaction_log_record,
    OFFSETS_DECODER: parse_offsets_record,
}


# --- indexes and snapshots -------------------------------------------------------------


def dump_offset_index(path: str, out: TextIO) -> None:
    entries = read_offset_index_file(path, _base_offset(path))
    if not entries:
        out.write(f"{path} is empty.\n")
    for offset, position in entries:
        out.write(f"offset: {offset} position: {position}\n")


def dump_time_index(path: str, out: TextIO) -> None:
    entries = read_time_index_file(path, _base_offset(path))
    if not entries:
        out.write(f"{path} is empty.\n")
    for timestamp, offset in entries:
        out.write(f"timestamp: {timestamp} offset: {offset}\n")


def dump_txn_index(path: str, out: TextIO) -> None:
    for txn in read_txn_index_file(path):
        out.write(
            f"version: {TXN_INDEX_VERSION} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}\n"
        )


def dump_snapshot(path: str, out: TextIO) -> None:
    entries = read_snapshot_file(path)
    if entries is None:
        out.write(f"{path} is not a valid producer snapshot (version, CRC or size)\n")
        return
    for entry in entries:
        # Kafka 4.3 (DumpLogSegments in Java) prints currentTxnFirstOffset as a Java OptionalLong.
        txn_first = "OptionalLong.empty" if entry.current_txn_first_offset < 0 \
            else f"OptionalLong[{entry.current_txn_first_offset}]"
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn_first} "
            f"lastTimestamp: {entry.last_timestamp}"
        )
        if entry.batches:  # a snapshot keeps only the producer's last batch
            last = entry.batches[-1]
            line += (
                f" firstSequence: {last.first_seq} lastSequence: {last.last_seq} lastOffset: {last.last_offset} "
                f"offsetDelta: {last.last_offset - last.first_offset} timestamp: {last.timestamp}"
            )
        out.write(line + "\n")
