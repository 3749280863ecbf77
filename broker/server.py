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
from collections.abc import Mapping, Sequence
from typing import Protocol

from ottla.coordinator.group import GroupConfig
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.share_config import ShareConfig
from ottla.coordinator.share_coordinator import STATE_TOPIC_CONFIGS, ShareCoordinator
from ottla.coordinator.share_state_records import TOPIC as SHARE_STATE_TOPIC
from ottla.coordinator.transactions import TransactionCoordinator
from ottla.protocol import compiled_codec
from ottla.storage import compaction
from ottla.storage.log_manager import LoadReport, LogManager, Topic, write_snapshots

from .client_quotas import ClientQuotas
from .config import BrokerConfig, listener_text
from .durability import GroupCommit, RollFlush, flush_in_background
from .dynamic_config import DynamicBrokerConfigs
from .faults import Faults
from .fetch_sessions import FetchSessionCache
from .group_configs import GroupConfigs
from .logging import get_logger
from .metrics import Metrics
from .network.dispatch import Dispatcher
from .network.listener import Listeners
from .network.request_memory import RequestMemory
from .scheduler import Scheduler
from .security.authorizer import Authorizer, parse_super_users
from .security.scram_credentials import ScramCredential, ScramCredentials
from .services import Services, create_offsets_topic
from .share_sessions import ShareSessionCache
from .watchers import PartitionWatchers
from .worker_threads import WorkerThreads

log = get_logger("ottla.broker")

# Partitions whose producer-state snapshots a checkpoint encodes between two turns of the
# event loop.
SNAPSHOTS_PER_SLICE = 1_000
# How often the background tasks look for work. Only topics with a flush.ms set need the
# flush check; once a second is as fine as Kafka's flush scheduler gets.
FLUSH_CHECK_SECONDS = 1
# Session expiry and rebalance windows are checked a few times a second: the timeouts
# involved are seconds long (group.min.session.timeout.ms is 6 s).
GROUP_SESSION_CHECK_SECONDS = 0.2
# Kafka checks every 10 minutes (producer.id.expiration.check.interval.ms); the
# expirations themselves are a day and a week long.
PRODUCER_EXPIRY_CHECK_MAX_SECONDS = 600
# Idle connections are looked for four times per connections.max.idle.ms, and at least
# this often.
IDLE_CHECK_MAX_SECONDS = 30


class Neighbour(Protocol):
    """A server that runs beside the broker on its event loop and is no part of it: the
    admin endpoint with its web console, the schema registry. broker/ imports none of them
    (tests/unit/test_import_graph.py); `ottla serve` (tools/serve.py) attaches them with
    `Broker.attach`, and the broker calls these as it starts and stops."""

    def data_loaded(self) -> None:
        """The data directory is loaded and no client is connected yet (the registry
        takes `_schemas` here, before any client could write it)."""
        ...

    async def start(self) -> Mapping[str, str | None]:
        """Serve (the Kafka listeners are open); returns what the "ottla ready" log
        line names besides the listeners (each server's URL)."""
        ...

    async def stop(self) -> None:
        """Stop serving (the Kafka connections are closed)."""
        ...


class Broker:
    def __init__(self, config: BrokerConfig, add_scram: Sequence[tuple[str, str, ScramCredential]] = (),
                 config_sources: Mapping[str, str] | None = None) -> None:
        self.config = config
        # Where each static setting came from (its server.properties file, OTTLA_<KEY>
        # or the command line), as `ottla serve` resolved it: the console shows it.
        self.config_sources = dict(config_sources or {})
        self._add_scram = list(add_scram)
        self.kafka_listeners = Listeners(config)
        # The listeners with their bound ports, and the open connections (the console
        # and the metrics read them).
        self.listeners = self.kafka_listeners.bound
        self.connections = self.kafka_listeners.connections
        self.watchers = PartitionWatchers()
        # Told of every append: a long-polling Fetch waits for one, and with --fsync the
        # group commit too. Without it the watchers are called straight (one Python call
        # per append fewer: bench/RESULTS.md, "The costs of many round trips"), and only
        # for a partition some Fetch waits on (most appends: none, and no call at all).
        self.logs = LogManager(config.data_dir, config.log,
                               on_append=self._appended if config.fsync else self.watchers.notify,
                               max_partitions=config.max_broker_partitions,
                               appends_wanted=None if config.fsync else self.watchers.waited)
        self.logs.fsync_on_ack = config.fsync
        self.logs.on_flushed = self.watchers.notify  # --fsync: records readable once fsynced
        # With --fsync, responses wait for an fsync shared by all recent writes.
        self.group_commit = GroupCommit(self.logs) if config.fsync else None
        # Without it, a rolled segment is flushed at once, as Kafka flushes it.
        self.roll_flush = None if config.fsync else RollFlush(self.logs)
        if self.roll_flush is not None:
            self.logs.on_roll = self.roll_flush.rolled
        self.metrics = Metrics()
        self.faults = Faults(self.logs, self.metrics)
        self.dispatcher = Dispatcher(self.faults, self.metrics, self.group_commit)
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        # What runs beside the broker (attach): started and stopped with it.
        self.neighbours: list[Neighbour] = []
        self.scheduler = Scheduler()
        self.threads = WorkerThreads()
        # Everything that exists only once the data directory is loaded: the
        # coordinators, the credentials and ACLs, what handlers use. Built in one place,
        # _open_data_directory, at start; None until then.
        self.services: Services | None = None
        self._stopping = False
        self._stopped = asyncio.Event()
        self._loading: asyncio.Future[None] | None = None  # the coordinators' load
        self._checkpointing: asyncio.Future[None] | None = None  # see _checkpoint
        self._recovered_checkpoint: asyncio.Future[None] | None = None
        self._coordinators_ready = asyncio.Event()

    def attach(self, neighbour: Neighbour) -> None:
        """Start `neighbour` with the broker and stop it with the broker (before `start`)."""
        assert self.services is None, "neighbours are attached before the broker starts"
        self.neighbours.append(neighbour)

    def _open_data_directory(self) -> tuple[Services, LoadReport]:
        """Load (and after a crash recover) every partition, then build what reads the
        data directory: the SCRAM users, the ACLs, the producer ids, the coordinators
        (opened, not loaded: they replay their topics once the broker serves)."""
        config = self.config
        report = self.logs.load()
        data_dir = self.logs.data_dir
        scram = ScramCredentials(data_dir)
        if self._add_scram:
            scram.change(self._add_scram, [])
            log.info("scram credentials added", users=[(user, mechanism) for user, mechanism, _ in self._add_scram])
        authorizer = Authorizer(data_dir, parse_super_users(config.super_users),
                                config.allow_everyone_if_no_acl_found) if config.authorizer_class_name else None
        markers = MarkerWriter(self.logs, durable=config.fsync)
        producer_ids = ProducerIdAllocator(data_dir)
        transactions = TransactionCoordinator(
            self.logs, producer_ids, markers,
            num_partitions=config.transaction_state_partitions,
            max_timeout_ms=config.transaction_max_timeout_ms,
            max_transactional_ids=config.max_transactional_ids,
        )
        group_configs = GroupConfigs(data_dir)
        groups = GroupCoordinator(
            self.logs, lambda: create_offsets_topic(self.logs, config.offsets_topic_partitions, self),
            GroupConfig(
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                max_metadata_bytes=config.offset_metadata_max_bytes,
                num_partitions=config.offsets_topic_partitions,
                consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
                consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                consumer_max_size=config.group_consumer_max_size,
                consumer_assignors=config.group_consumer_assignors,
                streams_session_timeout_ms=config.group_streams_session_timeout_ms,
                streams_heartbeat_interval_ms=config.group_streams_heartbeat_interval_ms,
                streams_num_standby_replicas=config.group_streams_num_standby_replicas,
                streams_max_size=config.group_streams_max_size,
                streams_min_session_timeout_ms=config.group_streams_min_session_timeout_ms,
                streams_max_session_timeout_ms=config.group_streams_max_session_timeout_ms,
                streams_min_heartbeat_interval_ms=config.group_streams_min_heartbeat_interval_ms,
                streams_max_heartbeat_interval_ms=config.group_streams_max_heartbeat_interval_ms,
                streams_max_standby_replicas=config.group_streams_max_standby_replicas,
                streams_initial_rebalance_delay_ms=config.group_streams_initial_rebalance_delay_ms,
                consumer_min_session_timeout_ms=config.group_consumer_min_session_timeout_ms,
                consumer_max_session_timeout_ms=config.group_consumer_max_session_timeout_ms,
                consumer_min_heartbeat_interval_ms=config.group_consumer_min_heartbeat_interval_ms,
                consumer_max_heartbeat_interval_ms=config.group_consumer_max_heartbeat_interval_ms,
            ),
            group_configs.of,
        )
        # The offsets' own listener: GroupCoordinator.on_marker only passes each marker on.
        markers.listeners.append(groups.offsets.on_marker)
        transactions.open()
        groups.open()
        share_config = ShareConfig(record_lock_duration_ms=config.group_share_record_lock_duration_ms,
                                   delivery_count_limit=config.group_share_delivery_count_limit,
                                   session_timeout_ms=config.group_share_session_timeout_ms,
                                   heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                                   state_topic_partitions=config.share_coordinator_state_topic_num_partitions)
        shares = ShareCoordinator(
            self.logs, lambda: self._create_internal_topic(SHARE_STATE_TOPIC, share_config.state_topic_partitions),
            share_config, groups.groups, groups.offsets.loading, group_configs.of, write_group=groups.offsets.write)
        services = Services(
            config=config, logs=self.logs, transactions=transactions, groups=groups,
            markers=markers, producer_ids=producer_ids, waiters=self.watchers, events=self,
            threads=self.threads, scram=scram, security_events=self.metrics, authorizer=authorizer,
            dynamic_configs=DynamicBrokerConfigs(data_dir),
            fetch_sessions=FetchSessionCache(config.fetch_session_cache_slots),
            quotas=ClientQuotas(data_dir),
            shares=shares, share_sessions=ShareSessionCache(share_config.max_share_sessions),
        )
        services.group_configs = group_configs
        return services, report

    def _create_internal_topic(self, name: str, partitions: int) -> None:
        if self.logs.topic(name) is None:
            self.logs.create_topic(name, partitions, STATE_TOPIC_CONFIGS)
            self.topic_created(name, partitions, STATE_TOPIC_CONFIGS)

    def _started(self) -> Services:
        assert self.services is not None, "the broker is not started"
        return self.services

    def _appended(self, topic: str, partition: int) -> None:
        """An append, with --fsync: a long-polling Fetch may wait for it, and the group
        commit covers its partition at its next fsync."""
        self.watchers.notify(topic, partition)
        assert self.group_commit is not None
        self.group_commit.appended(topic, partition)

    @property
    def node_id(self) -> int:
        return self.logs.node_id

    @property
    def stopping(self) -> bool:
        return self._stopping

    def metrics_text(self) -> str:
        services = self._started()  # the admin endpoint answers once the broker has started
        return self.metrics.render(connections=len(self.connections), logs=self.logs,
                                   transactions=services.transactions, groups=services.groups,
                                   faults_armed=self.faults.remaining, task_failures=self.scheduler.failures,
                                   fetch_sessions=services.fetch_sessions)

    @property
    def bootstrap(self) -> str:
        host, port = self.listeners[0].advertised_address
        return f"{host}:{port}"

    # --- topics (the pytest plugin and tests create them on a started broker) ----------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic | None:
        return self._started().create_topic(name, partitions, configs)

    # TopicEvents (services.py): what the request path tells the broker.
    def topic_created(self, name: str, partitions: int, configs: dict[str, str] | None) -> None:
        log.info("topic created", topic=name, partitions=partitions, configs=configs or None)

    def topic_deleted(self, name: str) -> None:
        log.info("topic deleted", topic=name)

    # --- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Recover the partition logs and start serving. The coordinators load their
        internal topics after that, in the background (`coordinators_loaded`)."""
        started = time.monotonic()
        _raise_open_file_limit()
        self.services, report = self._open_data_directory()
        for neighbour in self.neighbours:
            neighbour.data_loaded()
        await self.kafka_listeners.start(self.services, self.dispatcher, self.request_memory)
        named: dict[str, str | None] = {}
        for neighbour in self.neighbours:
            named.update(await neighbour.start())
        self._schedule_background_work()
        self.scheduler.start()
        self._loading = asyncio.ensure_future(self._load_coordinators())
        if not report.clean:
            self._recovered_checkpoint = asyncio.ensure_future(self._checkpoint_recovered())
        # What start-up loaded (modules, kio's schema classes, the recovered state) lives
        # as long as the broker: take it out of the cyclic collector's full passes, which
        # would otherwise walk it all and stall every connection for tens of ms.
        gc.freeze()
        log.info(
            "ottla ready",
            bootstrap=self.bootstrap,
            listening=listener_text(self.listeners),
            **named,
            data_dir=self.logs.data_dir,
            partitions=report.partitions,
            clean_start=report.clean,
            recovered_bytes_truncated=report.truncated_bytes,
            recovered_bytes_checked=report.checked_bytes,
            logs_seconds=round(report.seconds, 3),
            startup_seconds=round(time.monotonic() - started, 3),
            # "compiled" or "python" (protocol/compiled_codec.py: OTTLA_PURE_PYTHON, or no C compiler).
            request_path="compiled" if compiled_codec.ENABLED else "python",
        )

    async def _load_coordinators(self) -> None:
        started = time.monotonic()
        try:
            # One after the other, transactions first (producers wait on them): loaded
            # side by side, a request would wait for a slice of each.
            services = self._started()
            transactional_ids = await services.transactions.load()
            groups = await services.groups.load()
            share_partitions = await services.shares.load()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Their partitions would answer COORDINATOR_LOAD_IN_PROGRESS for ever: a
            # broker that cannot read its own internal topics stops, as it did when
            # this failed before serving.
            log.exception("coordinator loading failed: stopping")
            asyncio.ensure_future(self.stop())
            return
        # Load-time objects live as long as the broker (see `gc.freeze` in `start`).
        gc.freeze()
        self._coordinators_ready.set()
        log.info("coordinators loaded", transactional_ids=transactional_ids, groups=groups,
                 share_partitions=share_partitions,
                 seconds=round(time.monotonic() - started, 3))

    async def coordinators_loaded(self) -> bool:
        """Wait until both coordinators have loaded their topics (False: the broker
        stopped first)."""
        waits = [asyncio.ensure_future(self._coordinators_ready.wait()), asyncio.ensure_future(self._stopped.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiting in pending:
            waiting.cancel()
        return self._coordinators_ready.is_set()

    @property
    def coordinators_loading(self) -> bool:
        return not self._coordinators_ready.is_set()

    def _schedule_background_work(self) -> None:
        config = self.config
        every = self.scheduler.every
        every("checkpoint", config.checkpoint_interval_ms / 1000, self._checkpoint)
        every("flush", FLUSH_CHECK_SECONDS, lambda: self.logs.flush_due(time.time() * 1000))
        every("transaction-timeouts", config.transaction_timeout_check_ms / 1000, self._abort_timed_out_transactions)
        every("group-sessions", GROUP_SESSION_CHECK_SECONDS, self._expire_group_sessions)
        every("retention", config.retention_check_interval_ms / 1000, self._enforce_retention)
        # The cleaning itself runs in a worker thread: request handling never waits on it.
        every("compaction", config.cleaner_backoff_ms / 1000, self._compact)
        every("producer-expiry", min(PRODUCER_EXPIRY_CHECK_MAX_SECONDS, config.producer_id_expiration_ms / 1000),
              self._expire_idle_producers)
        if config.connections_max_idle_ms > 0:
            every("idle-connections", min(config.connections_max_idle_ms / 4 / 1000, IDLE_CHECK_MAX_SECONDS),
                  self._close_idle_connections)

    def _close_idle_connections(self) -> None:
        deadline = asyncio.get_running_loop().time() - self.config.connections_max_idle_ms / 1000
        for connection in list(self.connections):
            since = connection.idle_since()
            if since is not None and since < deadline:
                log.info("closing idle connection", peer=connection.peer, client_id=connection.client_id,
                         idle_ms=self.config.connections_max_idle_ms)
                connection.close()

    def _checkpoint(self) -> asyncio.Future[None]:
        """Flush the logs and write snapshots and checkpoints, the slow parts in worker
        threads. One run at a time (a call during a run joins it); stop() waits for the
        run in progress, whose threads cannot be cancelled."""
        if self._checkpointing is None or self._checkpointing.done():
            self._checkpointing = asyncio.ensure_future(self._write_checkpoint())
        return asyncio.shield(self._checkpointing)

    async def _write_checkpoint(self) -> None:
        partitions = self.logs.all_partitions()
        await flush_in_background(partitions)
        # The snapshots are encoded on the loop, where the producer states change, a
        # slice of partitions at a time, so that thousands of partitions do not hold the
        # loop, and the requests waiting on it, in one go.
        due = []
        for at in range(0, len(partitions), SNAPSHOTS_PER_SLICE):
            due += self.logs.snapshots_due(partitions[at:at + SNAPSHOTS_PER_SLICE])
            await asyncio.sleep(0)
        await asyncio.to_thread(write_snapshots, due)
        await asyncio.to_thread(self.logs.write_checkpoint_files, self.logs.checkpoint_offsets())

    async def _checkpoint_recovered(self) -> None:
        """After a crash: flush what recovery checked and move the recovery points past
        it now, not at the first periodic checkpoint (see LogManager.load)."""
        started = time.monotonic()
        try:
            await self._checkpoint()
        except Exception:  # the periodic checkpoint tries again
            log.exception("checkpoint after recovery failed; the periodic one tries again")
        else:
            log.info("recovered logs flushed and checkpointed", seconds=round(time.monotonic() - started, 3))

    def _abort_timed_out_transactions(self) -> None:
        for txn_id in self._started().transactions.abort_timed_out():
            log.info("transaction timed out: fenced and aborted", transactional_id=txn_id)

    def _expire_idle_producers(self) -> None:
        config = self.config
        producers = self.logs.expire_producers(int(time.time() * 1000), config.producer_id_expiration_ms)
        txn_ids = self._started().transactions.expire_transactional_ids(config.transactional_id_expiration_ms)
        if producers or txn_ids:
            log.info("expired idle producers", producer_states=producers, transactional_ids=len(txn_ids))

    def _expire_group_sessions(self) -> None:
        for group_id, member_id in self._started().groups.tick():
            log.info("group member session expired", group=group_id, member=member_id)
        # A share session outlives its member's group session, as in Kafka: the member's
        # next ShareAcknowledge (or final ShareFetch) still finds it (share_sessions.py).
        for group_id, member_id in self._started().shares.tick():
            log.info("share group member session expired", group=group_id, member=member_id)

    def _enforce_retention(self) -> None:
        deleted = self.logs.enforce_retention(int(time.time() * 1000))
        if deleted:
            log.info("retention deleted segments", segments=deleted)

    async def _compact(self) -> None:
        if self.coordinators_loading:
            # A swap under a coordinator's replay could take a tombstone away after the
            # replay read the value it deletes.
            return
        # Planning and swapping touch the live segment lists, so they stay on the loop.
        plan = self.logs.plan_compaction(int(time.time() * 1000))
        if plan is None:
            return
        started = time.monotonic()
        cleaned = await asyncio.to_thread(compaction.clean, plan)
        if self.logs.finish_compaction(plan, cleaned):
            log.info("compacted", topic=plan.log.topic, partition=plan.log.partition, up_to=plan.end,
                     segments=len(cleaned), seconds=round(time.monotonic() - started, 3))

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        if self.services is not None:
            self.services.stopping = True  # long-polling fetches stop waiting
        started = time.monotonic()
        log.info("shutting down", connections=len(self.connections))
        self.kafka_listeners.stop_accepting()
        self.watchers.wake_all()
        await asyncio.gather(*(c.finish() for c in list(self.connections)), return_exceptions=True)
        await self.scheduler.stop()
        # A checkpoint's worker threads run on when cancelled: let them finish first.
        running = [f for f in (self._recovered_checkpoint, self._checkpointing) if f is not None]
        await asyncio.gather(*running, return_exceptions=True)
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()  # the next start loads again from the logs
            await asyncio.gather(self._loading, return_exceptions=True)
        self.threads.close()
        await self.kafka_listeners.wait_closed()
        for neighbour in self.neighbours:
            await neighbour.stop()
        if self.services is not None:
            self.services.transactions.close()
        if self.roll_flush is not None:
            await self.roll_flush.wait_idle()  # its fsyncs run on: not under the logs' close
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
