"""The broker process: its state, the listener, start-up and graceful shutdown.

Start-up: load (and, after a crash, recover) every partition, then listen, then print
the bootstrap address. Shutdown (SIGTERM/SIGINT): stop accepting, wake long-polling
fetches, answer the requests each connection has already received, close the
connections, then close the logs cleanly (indexes, producer snapshots, checkpoints,
the clean-shutdown marker) so the next start needs no recovery.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import time
from dataclasses import replace
from typing import Any

from ottla.coordinator.group import GroupConfig
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.transactions import INTERNAL_TOPIC_CONFIGS, TransactionCoordinator

from ottla.storage import compaction
from ottla.storage.log_manager import LogManager, Topic

from .admin_http import AdminServer
from .config import BrokerConfig, Listener, listener_text
from .connection import Connection
from .faults import Faults
from .durability import GroupCommit, flush_in_background
from .logging import get_logger
from .metrics import Metrics
from .watchers import PartitionWatchers

log = get_logger("ottla.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.watchers = PartitionWatchers()
        self.logs = LogManager(config.data_dir, config.log, on_append=self._appended)
        # With --fsync, responses wait for an fsync shared by all recent writes.
        self.group_commit = GroupCommit(self.logs) if config.fsync else None
        self.markers = MarkerWriter(self.logs)
        # Set at start, once the data directory is loaded.
        self.producer_ids: ProducerIdAllocator = None  # type: ignore[assignment]
        self.transactions: TransactionCoordinator = None  # type: ignore[assignment]
        self.groups = GroupCoordinator(
            self.logs, self._create_offsets_topic,
            GroupConfig(
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                max_metadata_bytes=config.offset_metadata_max_bytes,
                num_partitions=config.offsets_topic_partitions,
            ),
        )
        self.markers.listeners.append(self.groups.on_marker)
        self.connections: set[Connection] = set()
        self.stopping = False
        # The configured listeners, with the port each one actually bound (port 0 asks
        # for any free port) once the broker has started.
        self.listeners: list[Listener] = list(config.listeners)
        self._servers: list[asyncio.AbstractServer] = []
        self.metrics = Metrics()
        self.faults = Faults(self)
        self.admin = AdminServer(self) if config.admin_port is not None else None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()

    def _appended(self, topic: str, partition: int) -> None:
        self.watchers.notify(topic, partition)
        if self.group_commit is not None:
            self.group_commit.appended(topic, partition)

    @property
    def node_id(self) -> int:
        return self.logs.node_id

    @property
    def admin_url(self) -> str | None:
        if self.admin is None:
            return None
        return f"http://{self.listeners[0].advertised_address[0]}:{self.admin.port}"

    @property
    def bootstrap(self) -> str:
        host, port = self.listeners[0].advertised_address
        return f"{host}:{port}"

    # --- topics (shared by CreateTopics, Metadata auto-creation and the coordinators) ----

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> Topic | None:
        if validate_only:
            self.logs.validate_new_topic(name, partitions)
            self.logs.default_config.with_topic_configs(configs or {})
            return None
        topic = self.logs.create_topic(name, partitions, configs)
        log.info("topic created", topic=name, partitions=partitions, configs=configs or None)
        return topic

    def _create_offsets_topic(self) -> None:
        """`__consumer_offsets` is created on first use, as Kafka does."""
        if self.logs.topic(OFFSETS_TOPIC) is None:
            self.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_partitions, INTERNAL_TOPIC_CONFIGS)

    def offsets_partition_for(self, group_id: str) -> tuple[str, int]:
        self._create_offsets_topic()
        return OFFSETS_TOPIC, self.groups.partition_for(group_id)

    def delete_topic(self, name: str) -> Topic:
        topic = self.logs.delete_topic(name)
        log.info("topic deleted", topic=name)
        return topic

    # --- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        _raise_open_file_limit()
        report = self.logs.load()
        self.producer_ids = ProducerIdAllocator(self.logs.data_dir)
        self.transactions = TransactionCoordinator(
            self.logs, self.producer_ids, self.markers,
            num_partitions=self.config.transaction_state_partitions,
            max_timeout_ms=self.config.transaction_max_timeout_ms,
        )
        transactional_ids = self.transactions.load()
        groups = self.groups.load()
        loop = asyncio.get_running_loop()
        for i, listener in enumerate(self.listeners):
            # Not serving until the bound port is known: a connection is answered with
            # its listener's advertised address, which may be that port.
            server = await loop.create_server(
                lambda i=i: Connection(self, self.listeners[i]), listener.bind_host, listener.port,
                reuse_address=True, backlog=1024, start_serving=False,
            )
            self.listeners[i] = replace(listener, port=server.sockets[0].getsockname()[1])
            self._servers.append(server)
        for server in self._servers:
            await server.start_serving()
        if self.admin is not None:
            # On the first listener's interface: reachable wherever clients reach the broker.
            await self.admin.start(self.listeners[0].bind_host, self.config.admin_port)
        self._tasks.append(loop.create_task(self._checkpoint_periodically()))
        self._tasks.append(loop.create_task(self._abort_timed_out_transactions()))
        self._tasks.append(loop.create_task(self._tick_groups()))
        self._tasks.append(loop.create_task(self._enforce_retention()))
        self._tasks.append(loop.create_task(self._compact()))
        self._tasks.append(loop.create_task(self._flush_periodically()))
        self._tasks.append(loop.create_task(self._expire_idle_producers()))
        # What start-up loaded (modules, kio's schema classes, the recovered state) lives
        # as long as the broker: take it out of the cyclic collector's full passes, which
        # would otherwise walk it all and stall every connection for tens of ms.
        gc.freeze()
        log.info(
            "ottla ready",
            bootstrap=self.bootstrap,
            listening=listener_text(self.listeners),
            admin=self.admin_url,
            data_dir=self.logs.data_dir,
            partitions=report.partitions,
            transactional_ids=transactional_ids,
            groups=groups,
            clean_start=report.clean,
            recovered_bytes_truncated=report.truncated_bytes,
            recovered_bytes_checked=report.checked_bytes,
            startup_seconds=round(report.seconds, 3),
        )

    async def _checkpoint_periodically(self) -> None:
        interval = self.config.checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await flush_in_background(self.logs.all_partitions())
                self.logs.checkpoint()
            except OSError:
                log.exception("checkpoint failed")

    async def _flush_periodically(self) -> None:
        # Only topics with a flush.ms set need this; once a second is as fine as Kafka's
        # flush scheduler gets.
        while True:
            await asyncio.sleep(1)
            self.logs.flush_due(time.time() * 1000)

    async def _abort_timed_out_transactions(self) -> None:
        interval = self.config.transaction_timeout_check_ms / 1000
        while True:
            await asyncio.sleep(interval)
            for txn_id in self.transactions.abort_timed_out():
                log.info("transaction timed out: fenced and aborted", transactional_id=txn_id)

    async def _expire_idle_producers(self) -> None:
        # Kafka checks every 10 minutes (producer.id.expiration.check.interval.ms); the
        # expirations themselves are a day and a week long.
        config = self.config
        while True:
            await asyncio.sleep(min(600, config.producer_id_expiration_ms / 1000))
            producers = self.logs.expire_producers(int(time.time() * 1000), config.producer_id_expiration_ms)
            txn_ids = self.transactions.expire_transactional_ids(config.transactional_id_expiration_ms)
            if producers or txn_ids:
                log.info("expired idle producers", producer_states=producers, transactional_ids=len(txn_ids))

    async def _tick_groups(self) -> None:
        # Session expiry and rebalance windows are checked a few times a second: the
        # timeouts involved are seconds long (group.min.session.timeout.ms is 6 s).
        while True:
            await asyncio.sleep(0.2)
            for group_id, member_id in self.groups.tick():
                log.info("group member session expired", group=group_id, member=member_id)

    async def _enforce_retention(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            deleted = self.logs.enforce_retention(int(time.time() * 1000))
            if deleted:
                log.info("retention deleted segments", segments=deleted)

    async def _compact(self) -> None:
        # The cleaning itself runs in a worker thread: request handling never waits on
        # it. Planning and swapping touch the live segment lists, so they stay here.
        backoff = self.config.cleaner_backoff_ms / 1000
        while True:
            await asyncio.sleep(backoff)
            plan = self.logs.plan_compaction(int(time.time() * 1000))
            if plan is None:
                continue
            started = time.monotonic()
            try:
                cleaned = await asyncio.to_thread(compaction.clean, plan)
            except OSError:
                log.exception("compaction failed", topic=plan.log.topic, partition=plan.log.partition)
                continue
            if self.logs.finish_compaction(plan, cleaned):
                log.info("compacted", topic=plan.log.topic, partition=plan.log.partition, up_to=plan.end,
                         segments=len(cleaned), seconds=round(time.monotonic() - started, 3))

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self.stopping:
            await self._stopped.wait()
            return
        self.stopping = True
        started = time.monotonic()
        log.info("shutting down", connections=len(self.connections))
        for server in self._servers:
            server.close()
        self.watchers.wake_all()
        await asyncio.gather(*(c.finish() for c in list(self.connections)), return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=5)
            except asyncio.TimeoutError:
                pass
        if self.admin is not None:
            await self.admin.stop()
        if self.transactions is not None:
            self.transactions.close()
        self.logs.close()
        log.info("stopped", seconds=round(time.monotonic() - started, 3))
        self._stopped.set()


def _raise_open_file_limit() -> None:
    """Each segment keeps its log and index files open (as Kafka does): a thousand
    partitions need more descriptors than the usual soft limit of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            log.warning("could not raise the open file limit", soft=soft, hard=hard)
