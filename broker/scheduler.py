"""The broker's background work, supervised.

Checkpoints, flushes, retention, compaction, the transaction timeout, group sessions
and producer-id expiry each run at their own interval. A run that fails (a bug, a
disk that errs) must not end the task: Kafka's schedulers log the failure and run the
task again at its next turn, and so does this one. Each failure is logged with its
traceback and counted in /metrics (`ottla_background_task_failures_total{task=...}`),
so a task that keeps failing is seen, not silently gone.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .logging import get_logger

log = get_logger("ottla.scheduler")

# A task's work: what it returns is awaited when it is awaitable, and ignored otherwise.
Work = Callable[[], object]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    interval_s: float
    work: Work


class Scheduler:
    def __init__(self) -> None:
        self._tasks: list[Task] = []
        self._running: list[asyncio.Task[None]] = []
        self.failures: Counter[str] = Counter()  # by task name
        self.runs: Counter[str] = Counter()

    def every(self, name: str, interval_s: float, work: Work) -> None:
        """Run `work` every `interval_s` seconds once started, first after one interval.
        `work` may be a plain function or a coroutine function."""
        self._tasks.append(Task(name, interval_s, work))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._running = [loop.create_task(self._run(task), name=f"ottla-{task.name}") for task in self._tasks]

    async def stop(self) -> None:
        for running in self._running:
            running.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._running = []

    async def _run(self, task: Task) -> None:
        while True:
            await asyncio.sleep(task.interval_s)
            try:
                result = task.work()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:  # logged and counted; the task runs again
                self.failures[task.name] += 1
                log.exception("background task failed; it runs again at its next turn", task=task.name,
                              failures=self.failures[task.name], next_run_in_s=task.interval_s)
            else:
                self.runs[task.name] += 1
