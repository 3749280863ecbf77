"""The broker process: its state, the listener, start-up and graceful shutdown.

Start-up: load (and, after a crash, recover) every partition, then listen, then print
the bootstrap address. Shutdown (SIGTERM/SIGINT): stop accepting, wake long-polling
fetches, answer the requests each connection has already received, close the
connections, then close the logs cleanly (indexes, producer snapshots, checkpoints,
the clean-shutdown marker) so the next start needs no recovery.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from coordinator.producer_ids import ProducerIdAllocator

from storage.log_manager import LogManager, Topic

from .config import BrokerConfig
from .connection import Connection
from .logging import get_logger
from .watchers import PartitionWatchers

log = get_logger("ottla.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.watchers = PartitionWatchers()
        self.logs = LogManager(config.data_dir, config.log_config(), on_append=self.watchers.notify)
        self.producer_ids: ProducerIdAllocator | None = None  # set at start, after the data dir exists
        self.connections: set[Connection] = set()
        self.stopping = False
        self.port = config.port
        self._server: asyncio.AbstractServer | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()

    @property
    def node_id(self) -> int:
        return self.logs.node_id

    @property
    def bootstrap(self) -> str:
        return f"{self.config.advertised}:{self.port}"

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

    def delete_topic(self, name: str) -> Topic:
        topic = self.logs.delete_topic(name)
        log.info("topic deleted", topic=name)
        return topic

    # --- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        report = self.logs.load()
        self.producer_ids = ProducerIdAllocator(self.logs.data_dir)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Connection(self), self.config.host, self.config.port, reuse_address=True, backlog=1024
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._tasks.append(loop.create_task(self._checkpoint_periodically()))
        log.info(
            "ottla ready",
            bootstrap=self.bootstrap,
            listening=f"{self.config.host}:{self.port}",
            data_dir=self.logs.data_dir,
            partitions=report.partitions,
            clean_start=report.clean,
            recovered_bytes_truncated=report.truncated_bytes,
            startup_seconds=round(report.seconds, 3),
        )

    async def _checkpoint_periodically(self) -> None:
        interval = self.config.checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.logs.checkpoint()
            except OSError:
                log.exception("checkpoint failed")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self.stopping:
            await self._stopped.wait()
            return
        self.stopping = True
        started = time.monotonic()
        log.info("shutting down", connections=len(self.connections))
        if self._server is not None:
            self._server.close()
        self.watchers.wake_all()
        await asyncio.gather(*(c.finish() for c in list(self.connections)), return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)
            except asyncio.TimeoutError:
                pass
        self.logs.close()
        log.info("stopped", seconds=round(time.monotonic() - started, 3))
        self._stopped.set()



