"""Every scenario of the differential suite, by area."""

from __future__ import annotations

from ..harness import Scenario
from . import admin, basic, groups, idempotence, malformed, sasl_acls, share_groups, streams_groups, transactions

ALL: list[Scenario] = [*basic.SCENARIOS, *idempotence.SCENARIOS, *transactions.SCENARIOS, *groups.SCENARIOS,
                       *share_groups.SCENARIOS, *streams_groups.SCENARIOS, *admin.SCENARIOS, *malformed.SCENARIOS,
                       *sasl_acls.SCENARIOS]
