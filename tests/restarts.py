"""Restarting a test's broker both ways its state must survive: a clean shutdown
(SIGTERM) and a crash (SIGKILL, kill -9: nothing written at shutdown)."""

from __future__ import annotations

from ottla.testing import BrokerProcess

RESTARTS = ["SIGTERM", "SIGKILL"]


def restart(broker: BrokerProcess, how: str) -> None:
    """Stop the broker (`how`: "SIGTERM" or "SIGKILL") and start it again."""
    if how == "SIGTERM":
        broker.stop()
    elif how == "SIGKILL":
        broker.kill()
    else:
        raise ValueError(how)
    broker.start()
