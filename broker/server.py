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

from ottla.coordinator.group import GroupConfig
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.transactions import TransactionCoordinator

from ottla.storage import compaction
from ottla.storage.log_manager import LogManager, Topic, write_snapshots

from .admin.access import AdminAccess, Principal, admin_access
from .admin.admin_http import AdminServer
from .config import BrokerConfig, Listener, listener_text
from .network.connection import Connection
from .network.dispatch import Dispatcher
from .durability import GroupCommit, flush_in_background
from .client_quotas import ClientQuotas
from .admin.faults import Faults
from .fetch_sessions import FetchSessionCache
from .logging import get_logger
from .admin.metrics import Metrics
from .network.request_memory import RequestMemory
from .security.authorizer import CLUSTER_NAME, Authorizer, Operation, ResourceType, parse_super_users
from .dynamic_config import DynamicBrokerConfigs
from .scheduler import Scheduler
from .security.scram_credentials import ScramCredential, ScramCredentials
from .security.tls import parse_mapping_rules, server_context
from .worker_threads import WorkerThreads
from .services import Services, create_offsets_topic
from .watchers import PartitionWatchers
from .admin.web_console.app import WebConsole
from .schema_registry.access import ALTER_CLUSTER, WRITE, CallableAccess
from .schema_registry.registry import SchemaRegistry
from .schema_registry.rest import SchemaRegistryServer
from .schema_registry.store import TOPIC as SCHEMAS_TOPIC
from .schema_registry.store import SchemaStore

log = get_logger("ottla.broker")

# Partitions whose producer-state snapshots a checkpoint encodes between two turns of the
# event loop (a few ms on a quiet machine).
SNAPSHOTS_PER_SLICE = 1_000


class Broker:
    def __init__(self, config: BrokerConfig, add_scram: list[tuple[str, str, ScramCredential]] = (),  # type: ignore[assignment]
                 config_sources: Mapping[str, str] | None = None) -> None:
        self.config = config
        # Where each static setting came from (its server.properties file, OTTLA_<KEY>
        # or the command line), as `ottla serve` resolved it: the console shows it.
        self.config_sources = dict(config_sources or {})
        # Per listener: what its connections go through, and its TLS context. A file
        # that cannot be read stops the broker here, before anything listens.
        self.security = {listener.name: config.listener_security(listener) for listener in config.listeners}
        self._tls = {name: server_context(s.ssl) for name, s in self.security.items() if s.ssl is not None}
        self._mapping_rules = {name: parse_mapping_rules(s.ssl.principal_mapping_rules)
                               for name, s in self.security.items() if s.ssl is not None}
        self.scram = ScramCredentials(config.data_dir)
        self.authorizer = Authorizer(config.data_dir, parse_super_users(config.super_users),
                                     config.allow_everyone_if_no_acl_found) if config.authorizer_class_name else None
        self._add_scram = list(add_scram)
        self.watchers = PartitionWatchers()
        self.logs = LogManager(config.data_dir, config.log, on_append=self._appended)
        # With --fsync, responses wait for an fsync shared by all recent writes.
        self.group_commit = GroupCommit(self.logs) if config.fsync else None
        self.markers = MarkerWriter(self.logs)
        # Set at start, once the data directory is loaded.
        self.producer_ids: ProducerIdAllocator = None  # type: ignore[assignment]
        self.transactions: TransactionCoordinator = None  # type: ignore[assignment]
        self.groups = GroupCoordinator(
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
            ),
        )
        self.markers.listeners.append(self.groups.on_marker)
        self.connections: set[Connection] = set()
        # What request handlers get (services.py); built at start, once the data
        # directory is loaded and the coordinators exist.
        self.services: Services | None = None
        self._stopping = False
        # The configured listeners, with the port each one actually bound (port 0 asks
        # for any free port) once the broker has started.
        self.listeners: list[Listener] = list(config.listeners)
        self._servers: list[asyncio.AbstractServer] = []
        self.metrics = Metrics()
        self.faults = Faults(self.logs, self.metrics)
        self.dispatcher = Dispatcher(self.faults, self.metrics, self.group_commit)
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        self.admin = AdminServer(self.faults, self.metrics_text, lambda: self.stopping, config.admin_token,
                                 console=WebConsole(self), access=admin_access(self)) \
            if config.admin_port is not None else None
        self.schema_store = SchemaStore(self.logs)
        self.schema_registry = SchemaRegistryServer(SchemaRegistry(self.schema_store),
                                                    _registry_access(admin_access(self))) \
            if config.schema_registry_listener is not None else None
        self.scheduler = Scheduler()
        self.threads = WorkerThreads()
        self._stopped = asyncio.Event()
        self._loading: asyncio.Future[None] | None = None  # the coordinators' load
        self._checkpointing: asyncio.Future[None] | None = None  # see _checkpoint
        self._recovered_checkpoint: asyncio.Future[None] | None = None
        self._coordinators_ready = asyncio.Event()

    def _appended(self, topic: str, partition: int) -> None:
        self.watchers.notify(topic, partition)
        if topic == SCHEMAS_TOPIC and self.schema_registry is not None:
            # Records a client produced (a copy of another registry's topic): read them
            # once the append is done. The registry's own writes are read back at once.
            asyncio.get_running_loop().call_soon(self.schema_store.catch_up)
        if self.group_commit is not None:
            self.group_commit.appended(topic, partition)

    @property
    def node_id(self) -> int:
        return self.logs.node_id

    @property
    def stopping(self) -> bool:
        return self._stopping

    def metrics_text(self) -> str:
        return self.metrics.render(connections=len(self.connections), logs=self.logs, transactions=self.transactions,
                                   groups=self.groups, faults_armed=self.faults.remaining,
                                   task_failures=self.scheduler.failures,
                                   fetch_sessions=self.services.fetch_sessions if self.services else None)

    @property
    def admin_url(self) -> str | None:
        if self.admin is None:
            return None
        host = self.config.admin_host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"  # every interface: this one is sure to answer
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.admin.port}"

    @property
    def schema_registry_url(self) -> str | None:
        if self.schema_registry is None or self.config.schema_registry_listener is None:
            return None
        host = self.config.schema_registry_listener[0]
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.schema_registry.port}"

    @property
    def bootstrap(self) -> str:
        host, port = self.listeners[0].advertised_address
        return f"{host}:{port}"

    # --- topics (the pytest plugin and tests create them on a started broker) ----------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic | None:
        assert self.services is not None, "the broker is not started"
        return self.services.create_topic(name, partitions, configs)

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
        report = self.logs.load()
        if self._add_scram:
            self.scram.change(self._add_scram, [])
            log.info("scram credentials added", users=[(user, mechanism) for user, mechanism, _ in self._add_scram])
        self.producer_ids = ProducerIdAllocator(self.logs.data_dir)
        self.transactions = TransactionCoordinator(
            self.logs, self.producer_ids, self.markers,
            num_partitions=self.config.transaction_state_partitions,
            max_timeout_ms=self.config.transaction_max_timeout_ms,
        )
        self.transactions.open()
        self.groups.open()
        self.services = Services(
            config=self.config, logs=self.logs, transactions=self.transactions, groups=self.groups,
            markers=self.markers, producer_ids=self.producer_ids, waiters=self.watchers, events=self,
            threads=self.threads, scram=self.scram, security_events=self.metrics, authorizer=self.authorizer,
            dynamic_configs=DynamicBrokerConfigs(self.logs.data_dir),
            fetch_sessions=FetchSessionCache(self.config.fetch_session_cache_slots),
            quotas=ClientQuotas(self.logs.data_dir),
        )
        loop = asyncio.get_running_loop()
        for i, listener in enumerate(self.listeners):
            # Not serving until the bound port is known: a connection is answered with
            # its listener's advertised address, which may be that port.
            server = await loop.create_server(
                lambda i=i, name=listener.name: Connection(
                    self.services, self.dispatcher, self.listeners[i], self.connections,
                    self.config.socket_request_max_bytes, self.request_memory,
                    self.security[name], self._mapping_rules.get(name, ())),
                listener.bind_host, listener.port,
                reuse_address=True, backlog=1024, start_serving=False, ssl=self._tls.get(listener.name),
            )
            self.listeners[i] = replace(listener, port=server.sockets[0].getsockname()[1])
            self._servers.append(server)
        for server in self._servers:
            await server.start_serving()
        if self.admin is not None:
            await self.admin.start(self.config.admin_host, self.config.admin_port)
        if self.schema_registry is not None and self.config.schema_registry_listener is not None:
            self.schema_store.open()
            await self.schema_registry.start(*self.config.schema_registry_listener)
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
            admin=self.admin_url,
            schema_registry=self.schema_registry_url,
            data_dir=self.logs.data_dir,
            partitions=report.partitions,
            clean_start=report.clean,
            recovered_bytes_truncated=report.truncated_bytes,
            recovered_bytes_checked=report.checked_bytes,
            logs_seconds=round(report.seconds, 3),
            startup_seconds=round(time.monotonic() - started, 3),
        )

    async def _load_coordinators(self) -> None:
        started = time.monotonic()
        try:
            # One after the other, transactions first (producers wait on them): loaded
            # side by side, a request would wait for a slice of each.
            transactional_ids = await self.transactions.load()
            groups = await self.groups.load()
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
        # Only topics with a flush.ms set need this; once a second is as fine as Kafka's
        # flush scheduler gets.
        every("flush", 1, lambda: self.logs.flush_due(time.time() * 1000))
        every("transaction-timeouts", config.transaction_timeout_check_ms / 1000, self._abort_timed_out_transactions)
        # Session expiry and rebalance windows are checked a few times a second: the
        # timeouts involved are seconds long (group.min.session.timeout.ms is 6 s).
        every("group-sessions", 0.2, self._expire_group_sessions)
        every("retention", config.retention_check_interval_ms / 1000, self._enforce_retention)
        # The cleaning itself runs in a worker thread: request handling never waits on it.
        every("compaction", config.cleaner_backoff_ms / 1000, self._compact)
        # Kafka checks every 10 minutes (producer.id.expiration.check.interval.ms); the
        # expirations themselves are a day and a week long.
        every("producer-expiry", min(600, config.producer_id_expiration_ms / 1000), self._expire_idle_producers)
        if config.connections_max_idle_ms > 0:
            every("idle-connections", min(config.connections_max_idle_ms / 4000, 30), self._close_idle_connections)

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
        # slice of partitions at a time: all 10,000 at once held it for 20-30 ms on a
        # quiet machine, several times that on a loaded one.
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
        except Exception:  # noqa: BLE001 - the periodic checkpoint tries again
            log.exception("checkpoint after recovery failed; the periodic one tries again")
        else:
            log.info("recovered logs flushed and checkpointed", seconds=round(time.monotonic() - started, 3))

    def _abort_timed_out_transactions(self) -> None:
        for txn_id in self.transactions.abort_timed_out():
            log.info("transaction timed out: fenced and aborted", transactional_id=txn_id)

    def _expire_idle_producers(self) -> None:
        config = self.config
        producers = self.logs.expire_producers(int(time.time() * 1000), config.producer_id_expiration_ms)
        txn_ids = self.transactions.expire_transactional_ids(config.transactional_id_expiration_ms)
        if producers or txn_ids:
            log.info("expired idle producers", producer_states=producers, transactional_ids=len(txn_ids))

    def _expire_group_sessions(self) -> None:
        for group_id, member_id in self.groups.tick():
            log.info("group member session expired", group=group_id, member=member_id)

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
        for server in self._servers:
            server.close()
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
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=5)
            except asyncio.TimeoutError:
                pass
        if self.admin is not None:
            await self.admin.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self.transactions is not None:
            self.transactions.close()
        self.logs.close()
        log.info("stopped", seconds=round(time.monotonic() - started, 3))
        self._stopped.set()


def _registry_access(access: AdminAccess) -> CallableAccess:
    """The schema registry signs in the broker's users and asks its authorizer, as the
    admin endpoint does (broker/schema_registry/access.py has the mapping)."""
    principals: dict[str, Principal] = {}

    def sign_in(authorization: str) -> str | None:
        principal = access.principal(authorization)
        if principal is None:
            return None
        principals[principal.name] = principal
        return principal.name

    def allows(name: str, action: str, topic: str, peer: str) -> bool:
        principal = principals.get(name)
        if action == ALTER_CLUSTER:
            return access.allows(principal, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, peer)
        operation = Operation.WRITE if action == WRITE else Operation.DESCRIBE
        return access.allows(principal, operation, ResourceType.TOPIC, topic, peer)

    return CallableAccess(access.secured, sign_in, allows)


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
