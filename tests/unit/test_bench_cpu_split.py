"""bench/cpu_split.py: a process's CPU split between its main thread (the broker's event
loop) and the others, read from /proc."""

from __future__ import annotations

import os
import threading
import time

from bench.cpu_split import sample, split


def test_cpu_of_another_thread_counts_as_beside_the_loop():
    pid = os.getpid()

    def burn() -> None:  # 0.3 s of this thread's own CPU, however loaded the machine is
        while time.thread_time() < 0.3:
            pass

    before = sample(pid)
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()  # the thread has exited: the process's figure still holds its CPU
    cpu = split(before, sample(pid))
    assert cpu.other >= 0.25, cpu
    assert cpu.loop < 0.1 and cpu.other_share > 0.7, cpu
