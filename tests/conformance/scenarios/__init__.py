"""Every scenario of the differential suite, by area."""

from __future__ import annotations

from ..harness import Scenario
from . import basic

ALL: list[Scenario] = [*basic.SCENARIOS]
