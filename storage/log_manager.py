"""Every partition of a data directory: topics, their ids, start-up and shutdown.

Layout, as Kafka's:

    <data dir>/meta.properties                  cluster id and node id
    <data dir>/.kafka_cleanshutdown             present only after a clean shutdown
    <data dir>/recovery-point-offset-checkpoint
    <data dir>/log-start-offset-checkpoint
    <data dir>/topic-configs.json               per-topic config overrides (Kafka keeps
                                                these in its metadata log; we have none)
    <data dir>/<topic>-<partition>/             one directory per partition:
        partition.metadata                      the topic id
        00000000000000000000.log/.index/.timeindex/.txnindex, <offset>.snapshot
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Container
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError

from . import compaction
from .checkpoints import (
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    read_checkpoint,
    write_checkpoint,
)
from .compaction import CleanPlan
from .directories import fsync_directory, replace_durably
from .file_slice import FileSlice, slice_limit
from .log import PartitionLog
from .log_config import LogConfig
from .open_files import OPEN_FILES, budget_from_limit
from .producer_state import ProducerStateManager
from .retention import expired_segments
from .segment import LogSegment

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_FILE = "meta.properties"
TOPIC_CONFIGS_FILE = "topic-configs.json"
PARTITION_METADATA_FILE = "partition.metadata"
MAX_TOPIC_NAME = 249
# Kafka's internal topics: written by the coordinators only, never by clients.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# Matched whole (fullmatch): `$` also matches before a final newline, and "nl\n" was
# accepted as a topic whose directory no restart could read back (issue 40).
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka writes Uuids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    config: LogConfig
    # The per-topic overrides as given (Kafka names), persisted in topic-configs.json.
    configs: dict[str, str] = field(default_factory=dict)
    partitions: list[PartitionLog] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True, slots=True)
class CheckpointOffsets:
    """Each partition's recovery point and log start offset, taken together on the
    event loop; `taken` numbers them, so that older ones never overwrite newer."""

    taken: int
    recovery_points: dict[tuple[str, int], int]
    log_start_offsets: dict[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class LoadReport:
    partitions: int
    clean: bool
    truncated_bytes: int
    checked_bytes: int
    seconds: float


class LogManager:
    def __init__(self, data_dir: str, default_config: LogConfig,
                 on_append: Callable[[str, int], None] | None = None, max_partitions: int = 2**31 - 1,
                 appends_wanted: Container[tuple[str, int]] | None = None) -> None:
        self.data_dir = os.path.abspath(data_dir)
        # max.broker.partitions: the most partitions clients may make the broker hold
        # (each a directory, files and memory), the internal topics' aside.
        self.max_partitions = max_partitions
        self.default_config = default_config
        self.on_append = on_append
        # Only appends to these (topic, partition) call on_append, if given (PartitionLog).
        self.appends_wanted = appends_wanted
        self.write_check: Callable[[str, int], None] | None = None  # see set_write_check
        self.topics: dict[str, Topic] = {}
        # The topics clients may not write, delete, reconfigure or trim
        # (coordinator/internal_topics.py): Kafka's, and what the broker adds (add_internal_topic).
        self.internal_topics: frozenset[str] = INTERNAL_TOPICS
        self._topics_by_id: dict[uuid.UUID, Topic] = {}
        # Counts every change of the topics or their partitions: the Metadata answers
        # the broker keeps (broker/handlers/metadata.py) are good while it stands still.
        self.topics_changed = 0
        self.cluster_id = ""
        self.node_id = 1
        # How far each compacted partition is clean (its first dirty offset).
        self._cleaned_up_to: dict[tuple[str, int], int] = {}
        # See write_checkpoint_files.
        self._checkpoint_files_lock = threading.Lock()
        self._checkpoints_taken = 0
        self._checkpoint_files_written = 0
        # --fsync: a new partition's directory, its partition.metadata and the data
        # directory's entry for it are fsynced before CreateTopics answers, and records
        # are readable once fsynced (PartitionLog.high_watermark), whereupon
        # on_flushed(topic, partition) is called.
        self.fsync_on_ack = False
        self.on_flushed: Callable[[str, int], None] | None = None
        # Given to every partition log (PartitionLog.on_roll): the broker's flush of a
        # rolled segment.
        self.on_roll: Callable[[PartitionLog, int], None] | None = None

    # --- start-up ------------------------------------------------------------------------

    def add_internal_topic(self, name: str) -> None:
        """Keep `name` from clients as Kafka's internal topics are: the built-in schema
        registry's `_schemas`, while the registry is on (it is an ordinary topic for a
        registry of Confluent's pointed at the broker)."""
        self.internal_topics = self.internal_topics | {name}

    def load(self) -> LoadReport:
        started = time.monotonic()
        # The process's descriptor limit is known now (the broker raises it first): no
        # more segments keep their files open than it allows, however many are on disk.
        OPEN_FILES.budget = budget_from_limit()
        FileSlice.limit = slice_limit()
        if not os.path.isdir(self.data_dir):
            os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
            fsync_directory(os.path.dirname(self.data_dir))  # as Kafka's LogManager does
        # A directory Ottla has never started on (no meta.properties yet) holds nothing to
        # recover: its first start is as clean as one after a clean shutdown.
        first_start = not os.path.exists(os.path.join(self.data_dir, META_FILE))
        if first_start:
            # Records, ACLs and credentials are the owner's alone, whatever the umask or
            # whoever made the directory; an operator may open it up later on purpose.
            os.chmod(self.data_dir, 0o700)
        self._load_meta()
        marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery_points = read_checkpoint(os.path.join(self.data_dir, RECOVERY_POINT_FILE))
        start_offsets = read_checkpoint(os.path.join(self.data_dir, LOG_START_OFFSET_FILE))
        self._cleaned_up_to = read_checkpoint(os.path.join(self.data_dir, CLEANER_CHECKPOINT_FILE))
        by_topic: dict[str, list[tuple[int, str]]] = {}
        # scandir: the listing says which entries are directories, without a stat of each.
        with os.scandir(self.data_dir) as listing:
            directories = sorted((entry.name, entry.path) for entry in listing if entry.is_dir())
        for name, path in directories:
            if name.endswith("-delete"):
                shutil.rmtree(path, ignore_errors=True)  # a deletion interrupted by a crash
                continue
            match = _PARTITION_DIR.fullmatch(name)
            if match:
                by_topic.setdefault(match["topic"], []).append((int(match["partition"]), path))
        # ... unless partition directories were put there by hand: those are checked.
        clean = clean or (first_start and not by_topic)
        saved_configs = self._read_topic_configs()
        truncated = checked = 0
        count = 0
        for topic_name, parts in by_topic.items():
            parts.sort()
            topic_id = self._read_topic_id(parts[0][1]) or uuid.uuid4()
            configs = saved_configs.get(topic_name, {})
            topic = Topic(topic_name, topic_id, self.default_config.with_topic_configs(configs), configs=configs)
            for index, path in parts:
                key = (topic_name, index)
                log = PartitionLog.open(path, topic_name, index, topic.config, clean=clean,
                                        recovery_point=recovery_points.get(key, 0),
                                        log_start_offset=start_offsets.get(key, 0))
                truncated += log.truncated_bytes
                checked += log.checked_bytes
                self._attach(log)
                topic.partitions.append(log)
                count += 1
            self._register(topic)
        # After a crash, what recovery checked is still to be flushed and the recovery
        # points moved past it, so that a crash soon after this start does not check it
        # all again (each kill -9 in a row would otherwise check more than the last).
        # The broker does that (a checkpoint) in worker threads once it serves: 30,000
        # fsyncs and 10,000 snapshots for 10,000 partitions took 12 s of a 20 s start.
        # From here on the files are being written again: a crash is no longer clean.
        if os.path.exists(marker):
            os.unlink(marker)
            # For good: a marker a power loss brought back would have the next start
            # trust torn files unchecked.
            fsync_directory(self.data_dir)
        return LoadReport(count, clean, truncated, checked, time.monotonic() - started)

    def _load_meta(self) -> None:
        path = os.path.join(self.data_dir, META_FILE)
        props: dict[str, str] = {}
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if "=" in line and not line.startswith("#"):
                        k, v = line.strip().split("=", 1)
                        props[k] = v
        if "cluster.id" not in props:
            props = {"version": "1", "cluster.id": topic_id_text(uuid.uuid4()), "node.id": str(self.node_id)}
            with open(path + ".tmp", "w") as f:
                f.write("".join(f"{k}={v}\n" for k, v in props.items()))
                f.flush()
                os.fsync(f.fileno())
            replace_durably(path + ".tmp", path)
        self.cluster_id = props["cluster.id"]
        self.node_id = int(props.get("node.id", self.node_id))

    @staticmethod
    def _read_topic_id(partition_dir: str) -> uuid.UUID | None:
        try:
            with open(os.path.join(partition_dir, PARTITION_METADATA_FILE)) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key.strip() == "topic_id":
                        return parse_topic_id(value.strip())
        except (FileNotFoundError, ValueError):
            return None
        return None

    def _read_topic_configs(self) -> dict[str, dict[str, str]]:
        try:
            with open(os.path.join(self.data_dir, TOPIC_CONFIGS_FILE)) as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _save_topic_configs(self) -> None:
        path = os.path.join(self.data_dir, TOPIC_CONFIGS_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump({t.name: t.configs for t in self.topics.values() if t.configs}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(path + ".tmp", path)

    def _attach(self, log: PartitionLog) -> None:
        log.on_append = self.on_append
        log.appends_wanted = self.appends_wanted
        log.write_check = self.write_check
        log.visible_when_flushed = self.fsync_on_ack
        log.on_flushed = self.on_flushed
        log.on_roll = self.on_roll

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self._topics_by_id[topic.topic_id] = topic
        self.topics_changed += 1

    # --- topics --------------------------------------------------------------------------

    def topic(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._topics_by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    def set_write_check(self, check: Callable[[str, int], None] | None) -> None:
        """Have every partition, present and future, call `check(topic, partition)`
        before it writes (fault injection's failing disk); None takes it away."""
        self.write_check = check
        for topic in self.topics.values():
            for log in topic.partitions:
                log.write_check = check

    def validate_new_topic(self, name: str, partitions: int) -> None:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise KafkaError(ErrorCode.invalid_partitions, f"number of partitions must be positive, not {partitions}")
        self._check_partition_room(name, partitions)

    def _check_partition_room(self, name: str, adding: int) -> None:
        """POLICY_VIOLATION (as a create.topic.policy refuses) if `adding` partitions to
        `name` would take the broker past max.broker.partitions. The internal topics,
        created by their coordinators, are never refused."""
        if name in INTERNAL_TOPICS:
            return
        held = sum(len(topic.partitions) for topic in self.topics.values() if topic.name not in INTERNAL_TOPICS)
        if held + adding > self.max_partitions:
            raise KafkaError(ErrorCode.policy_violation,
                             f"{adding} more partition(s) would take the broker past max.broker.partitions "
                             f"({self.max_partitions}): it holds {held}")

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        self.validate_new_topic(name, partitions)
        configs = dict(configs or {})
        config = self.default_config.with_topic_configs(configs)
        topic = Topic(name, uuid.uuid4(), config, configs=configs)
        try:
            self._add_partition_logs(topic, partitions)
        except BaseException:
            # The disk refused partway (full, read-only): the partitions made so far go
            # too, or a restart would load the topic with fewer partitions than it has.
            for log in topic.partitions:
                log.close_files()
            for index in range(partitions):
                shutil.rmtree(os.path.join(self.data_dir, f"{name}-{index}"), ignore_errors=True)
            raise
        self._register(topic)
        if configs:
            self._save_topic_configs()
        return topic

    def validate_partition_count(self, name: str, count: int) -> Topic:
        """The topic whose partitions CreatePartitions would raise to `count`."""
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
        self._check_partition_room(name, count - current)
        return topic

    def add_partitions(self, name: str, count: int) -> Topic:
        """Raise a topic's partition count to `count` (CreatePartitions): new, empty
        partitions, as in Kafka; the existing ones are untouched."""
        topic = self.validate_partition_count(name, count)
        try:
            self._add_partition_logs(topic, count - len(topic.partitions))
        finally:
            self.topics_changed += 1  # even when the disk refused after some were added
        return topic

    def _add_partition_logs(self, topic: Topic, how_many: int) -> None:
        created = []
        for index in range(len(topic.partitions), len(topic.partitions) + how_many):
            path = os.path.join(self.data_dir, f"{topic.name}-{index}")
            log = PartitionLog.create(path, topic.name, index, topic.config)
            self._attach(log)
            with open(os.path.join(path, PARTITION_METADATA_FILE), "w") as f:
                f.write(f"version: 0\ntopic_id: {topic_id_text(topic.topic_id)}\n")
                if self.fsync_on_ack:
                    f.flush()
                    os.fsync(f.fileno())
            topic.partitions.append(log)
            created.append(path)
        if self.fsync_on_ack and created:
            # The topic id must survive with the partition (a new one after a power loss
            # would be another topic to clients that fetch by id). The segments' entries
            # are synced anyway by the first flush; the data directory once for all.
            for path in created:
                fsync_directory(path)
            fsync_directory(self.data_dir)

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        self._topics_by_id.pop(topic.topic_id, None)
        self.topics_changed += 1
        if topic.configs:
            self._save_topic_configs()
        doomed = []
        for log in topic.partitions:
            log.close_files()
            # Renamed first, as Kafka does, so a crash mid-delete never resurrects it.
            doomed.append(f"{log.directory}.{uuid.uuid4().hex}-delete")
            os.rename(log.directory, doomed[-1])
        if doomed:
            fsync_directory(self.data_dir)  # the renames, once for all (nor a power loss)
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        return topic

    def set_default_config(self, config: LogConfig) -> None:
        """New broker-wide defaults (dynamic broker configs): every topic's config is its
        overrides over them."""
        if config == self.default_config:
            return
        self.default_config = config
        for topic in self.topics.values():
            topic.config = config.with_topic_configs(topic.configs)
            for log in topic.partitions:
                log.config = topic.config

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace a topic's config overrides (validated as a whole first) and apply them
        to its partitions."""
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        config = self.default_config.with_topic_configs(configs)
        topic.config = config
        topic.configs = dict(configs)
        for log in topic.partitions:
            log.config = config
        self._save_topic_configs()
        return topic

    def plan_compaction(self, now_ms: int) -> CleanPlan | None:
        """The most worthwhile compaction pass over any partition, or None."""
        best = None
        for log in self.all_partitions():
            candidate = compaction.plan(log, self._cleaned_up_to.get((log.topic, log.partition), 0), now_ms)
            if candidate is not None and (best is None or candidate.end - candidate.first_dirty >
                                          best.end - best.first_dirty):
                best = candidate
        return best

    def finish_compaction(self, plan: CleanPlan, cleaned: list[LogSegment]) -> bool:
        """Swap a finished pass in (on the event loop) and remember how far the log is
        clean, in Kafka's cleaner-offset-checkpoint."""
        if not compaction.swap(plan.log, plan, cleaned):
            return False
        self._cleaned_up_to[(plan.log.topic, plan.log.partition)] = plan.end
        write_checkpoint(os.path.join(self.data_dir, CLEANER_CHECKPOINT_FILE), self._cleaned_up_to)
        return True

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        return sum(len(log.producer_state.remove_expired(now_ms, expiration_ms)) for log in self.all_partitions())

    def flush_due(self, now_ms: float) -> int:
        """fsync the partitions whose oldest unflushed message is older than flush.ms."""
        flushed = 0
        for log in self.all_partitions():
            if log.unflushed_messages and now_ms - log.last_flush_ms >= log.config.flush_ms:
                log.flush()
                flushed += 1
        return flushed

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the segments past their retention; returns how many."""
        deleted = 0
        for log in self.all_partitions():
            doomed = expired_segments(log, now_ms)
            if doomed and len(doomed) == len(log.segments):
                log.roll()  # the active segment is expired too: a partition keeps one segment
            log.delete_oldest_segments(doomed)
            deleted += len(doomed)
        return deleted

    def all_partitions(self) -> list[PartitionLog]:
        return [log for topic in self.topics.values() for log in topic.partitions]

    # --- checkpoints and shutdown --------------------------------------------------------

    def checkpoint(self, logs: list[PartitionLog] | None = None) -> None:
        """Write the recovery points (each partition's flushed offset: a crash rechecks
        only what follows it) and the log start offsets, with a producer-state snapshot
        for every partition (of `logs`, if given) whose producers changed, so that
        start-up replays only the log after the snapshot, all from this thread. The
        broker's periodic checkpoint flushes the logs first and writes the snapshots in
        a worker thread (snapshots_due, write_snapshots); DeleteRecords, which must
        not answer before its new log start offsets are on disk, snapshots only the
        partitions it changed (each snapshot is an fsync, too slow to do for all of
        them on the event loop)."""
        write_snapshots(self.snapshots_due(logs))
        self.write_checkpoints()

    def snapshots_due(self, logs: list[PartitionLog] | None = None) -> list[tuple[ProducerStateManager, int, bytes]]:
        """(state, offset, bytes) of a snapshot of every partition (of `logs`, if given)
        whose producers changed since its last one, encoded now, for `write_snapshots`."""
        return [(log.producer_state, log.log_end_offset, log.producer_state.encode_snapshot())
                for log in (self.all_partitions() if logs is None else logs) if log.producer_state.changed]

    def checkpoint_offsets(self) -> CheckpointOffsets:
        """The recovery points (flushed offsets) and log start offsets as of now, for
        `write_checkpoint_files`."""
        recovery = {}
        starts = {}
        for log in self.all_partitions():
            recovery[(log.topic, log.partition)] = log.flushed_offset
            starts[(log.topic, log.partition)] = log.log_start_offset
        self._checkpoints_taken += 1
        return CheckpointOffsets(self._checkpoints_taken, recovery, starts)

    def write_checkpoint_files(self, offsets: CheckpointOffsets) -> None:
        """Write the recovery points and log start offsets files. Any thread may: the
        broker's checkpoint does it in a worker thread (formatting and fsyncing the files
        of thousands of partitions would hold the event loop), while DeleteRecords writes
        them on the loop. Offsets taken before those already written are not written:
        an older log start offset on disk would bring deleted records back after a
        crash."""
        with self._checkpoint_files_lock:
            if offsets.taken < self._checkpoint_files_written:
                return
            write_checkpoint(os.path.join(self.data_dir, RECOVERY_POINT_FILE), offsets.recovery_points)
            write_checkpoint(os.path.join(self.data_dir, LOG_START_OFFSET_FILE), offsets.log_start_offsets)
            self._checkpoint_files_written = offsets.taken

    def write_checkpoints(self) -> None:
        """The recovery points and log start offsets files, from this thread."""
        self.write_checkpoint_files(self.checkpoint_offsets())

    def close(self) -> None:
        """Clean shutdown: indexes and snapshots written, checkpoints at the log ends, and
        the marker that lets the next start skip recovery."""
        for log in self.all_partitions():
            log.close()  # flushed: the recovery point is now the log end
        self.write_checkpoints()
        with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), "w"):
            pass


def write_snapshots(due: list[tuple[ProducerStateManager, int, bytes]]) -> None:
    """Write snapshots encoded by `snapshots_due`: files only, so a worker thread may do
    it (a snapshot costs an fsync and a rename: for thousands of partitions, too long
    for the event loop). One that fails leaves its state marked
    changed, for the next checkpoint; the first failure is raised once all are tried."""
    failure: OSError | None = None
    for state, offset, data in due:
        try:
            state.write_snapshot_file(offset, data)
        except OSError as exc:
            state.changed = True
            failure = failure or exc
    if failure is not None:
        raise failure
