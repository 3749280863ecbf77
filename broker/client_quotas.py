"""Client quotas (KIP-55, KIP-257, KIP-546), kept in the data directory as Kafka keeps
them in its metadata, set and read by AlterClientQuotas and DescribeClientQuotas.

An entity is a user, a client id, both, or an IP address; a name of None is the
default of its type (`<default>` in Kafka's tools). The keys are Kafka's:
producer_byte_rate and consumer_byte_rate, which are enforced (below);
request_percentage and controller_mutation_rate, kept and described but not enforced
(one node has no request handler pool to share, no controller to protect); and
connection_creation_rate for IP entities, kept and described likewise.

Enforcement is Kafka's ClientQuotaManager: the quota of a (user, client id) is the most
specific of, in order, /users/U/clients/C, /users/U/clients/<default>, /users/U,
/users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
/clients/C, /clients/<default>. Everyone the quota's entity names shares its rate (a
default applies to each user or client id on its own). The rate is measured over
SAMPLES windows of WINDOW_MS, as quota.window.num and quota.window.size.seconds
default; once a produce or fetch takes it over the quota, the answer carries
throttle_time_ms = (rate - quota) / quota x the measured window, and the connection
reads nothing more for that long (KIP-219), bounded by the whole window.
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode

from .json_files import read_json, write_json

FILE_NAME = "client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
# Each key, and whether its value is a whole number (Kafka's LONG and INT) or a double.
CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, "request_percentage": False,
               "controller_mutation_rate": False}
IP_KEYS = {"connection_creation_rate": True}
WINDOW_MS = 1000
SAMPLES = 11
# Beyond Kafka, which bounds neither: how many entities may have quotas, and how many
# rates are kept before the idle ones (nothing in the whole window) are dropped.
MAX_ENTITIES = 10_000
MAX_RATES = 10_000
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity: its (type, name) pairs in type order; name None is the type's default.
Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity as a request gives it, checked as Kafka checks it."""
    pairs = list(pairs)
    if not pairs:
        raise QuotaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    types = [t for t, _ in pairs]
    for entity_type in types:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
    if len(set(types)) != len(types):
        raise QuotaError(ErrorCode.invalid_request, f"Duplicate entity type in client quota entity: {types}")
    if IP in types and len(types) > 1:
        raise QuotaError(ErrorCode.invalid_request, "Invalid quota entity combination, IP entity should "
                                                    "not be combined with User or ClientId entities")
    for entity_type, name in pairs:
        if entity_type == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaError(ErrorCode.invalid_request, f"{name} is not a valid IP or resolvable host.") from None
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def _check_value(entity: Entity, key: str, value: float) -> None:
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        raise QuotaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
    if keys[key] and value != int(value):
        raise QuotaError(ErrorCode.invalid_request,
                         f"Invalid value {value} for configuration key {key}, must be a whole number")
    if value <= 0:
        raise QuotaError(ErrorCode.invalid_request, f"Invalid value {value} for configuration key {key}, "
                                                    "must be greater than 0")


@dataclass
class _Rate:
    """Bytes per second over the last SAMPLES windows (Kafka's Rate over a SampledStat)."""

    samples: list[list[int]] = field(default_factory=list)  # [window start ms, bytes]

    def record(self, nbytes: int, now_ms: int) -> float:
        """Count `nbytes` now; the rate with them."""
        if not self.samples or now_ms - self.samples[-1][0] >= WINDOW_MS:
            self.samples.append([now_ms, 0])
            # Samples older than the whole window count no more.
            while now_ms - self.samples[0][0] >= SAMPLES * WINDOW_MS:
                del self.samples[0]
        self.samples[-1][1] += nbytes
        return sum(b for _, b in self.samples) * 1000 / self.window_ms(now_ms)

    def unrecord(self, nbytes: int) -> None:
        self.samples[-1][1] -= nbytes

    def window_ms(self, now_ms: int) -> int:
        """The time the samples cover, at least all but one whole window (so a first
        burst is measured against the whole window, as Kafka measures it)."""
        elapsed = now_ms - self.samples[0][0]
        return max(elapsed, (SAMPLES - 1) * WINDOW_MS)


class ClientQuotas:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.quotas: dict[Entity, dict[str, float]] = {}
        for stored in read_json(self.path, []):
            self.quotas[tuple((t, n) for t, n in stored["entity"])] = dict(stored["quotas"])
        self._rates: dict[tuple[str, str | None, str | None], _Rate] = {}
        # The byte-rate keys some quota sets (a Produce with none in force reads this
        # rather than calling throttle_ms).
        self.byte_rate_keys = self._enforced_keys()

    # --- AlterClientQuotas and DescribeClientQuotas --------------------------------------

    def alter(self, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
              validate_only: bool) -> list[tuple[ErrorCode, str | None]]:
        """Each entry's (entity, [(key, value, remove)]) checked, and applied unless
        `validate_only`; an error code and message per entry, in order."""
        results: list[tuple[ErrorCode, str | None]] = []
        changed = False
        for pairs, ops in entries:
            try:
                entity = _entity(pairs)
                keys = [key for key, _, _ in ops]
                if len(set(keys)) != len(keys):
                    raise QuotaError(ErrorCode.invalid_request, f"Duplicate quota key in {keys}")
                for key, value, remove in ops:
                    if not remove:
                        _check_value(entity, key, value)
                    elif key not in (IP_KEYS if entity[0][0] == IP else CLIENT_KEYS):
                        raise QuotaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
            except QuotaError as exc:
                results.append((exc.code, exc.message))
                continue
            if entity not in self.quotas and len(self.quotas) >= MAX_ENTITIES and any(not r for _, _, r in ops):
                results.append((ErrorCode.invalid_request, f"Too many client quota entities (at most {MAX_ENTITIES})"))
                continue
            results.append((ErrorCode.none, None))
            if validate_only:
                continue
            values = self.quotas.setdefault(entity, {})
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del self.quotas[entity]
            changed = True
        if changed:
            self._save()
            self.byte_rate_keys = self._enforced_keys()
            self._rates.clear()  # measured against the quotas now in force
        return results

    def describe(self, components: list[tuple[str, int, str | None]],
                 strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """The entities matching every (entity type, match type, name) component (and,
        with `strict`, naming no other type), with their quotas. Raises QuotaError."""
        types = [t for t, _, _ in components]
        if len(set(types)) != len(types):
            raise QuotaError(ErrorCode.invalid_request, f"Duplicate entity type in filter: {types}")
        for entity_type, match_type, match in components:
            if entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
            if match_type == MATCH_EXACT and match is None:
                raise QuotaError(ErrorCode.invalid_request, f"Request specified exact match for {entity_type} "
                                                            "but no match value")
            if match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and match is not None:
                raise QuotaError(ErrorCode.invalid_request, f"Request specified a match value for {entity_type} "
                                                            "with a default or any-name match")
            if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise QuotaError(ErrorCode.invalid_request, f"Unhandled match type {match_type}")
        if IP in types and len(types) > 1:
            raise QuotaError(ErrorCode.invalid_request, "Invalid entity filter component combination, IP filter "
                                                        "component should not be used with User or ClientId "
                                                        "filter component.")

        def matches(entity: Entity) -> bool:
            names = dict(entity)
            if strict and set(names) != set(types):
                return False
            for entity_type, match_type, match in components:
                if entity_type not in names:
                    return False
                name = names[entity_type]
                if match_type == MATCH_EXACT and name != match:
                    return False
                if match_type == MATCH_DEFAULT and name is not None:
                    return False
                if match_type == MATCH_SPECIFIED and name is None:
                    return False
            return True

        return [(entity, dict(values)) for entity, values in sorted(self.quotas.items(), key=_order) if matches(entity)]

    def _save(self) -> None:
        stored = [{"entity": [list(pair) for pair in entity], "quotas": values}
                  for entity, values in sorted(self.quotas.items(), key=_order)]
        write_json(self.path, stored)

    # --- enforcement ---------------------------------------------------------------------

    def _enforced_keys(self) -> frozenset[str]:
        return frozenset(key for entity, values in self.quotas.items() if entity[0][0] != IP
                         for key in values if key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE))

    def _quota_of(self, key: str, user: str, client_id: str) -> tuple[float, str | None, str | None] | None:
        """The quota for `key` that applies, and the (user, client id) that share it."""
        u, c = ((USER, user),), ((CLIENT_ID, client_id),)
        du, dc = ((USER, None),), ((CLIENT_ID, None),)
        for entity, shared in (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (u, (user, None)),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (du, (user, None)),
            (c, (None, client_id)),
            (dc, (None, client_id)),
        ):
            value = self.quotas.get(entity, {}).get(key)
            if value is not None:
                return value, shared[0], shared[1]
        return None

    def window_bytes(self, key: str, user: str, client_id: str) -> int | None:
        """The most bytes the quota lets through in one measuring window, None if no
        quota applies. Kafka caps a Fetch's max bytes at it: a bigger answer would be
        over the quota by itself, answered empty, and asked for again for ever."""
        if key not in self.byte_rate_keys:
            return None
        found = self._quota_of(key, user, client_id)
        if found is None:
            return None
        return int(found[0] * (SAMPLES - 1) * WINDOW_MS / 1000)

    def throttle_ms(self, key: str, user: str, client_id: str, nbytes: int, *, count_when_over: bool = True) -> int:
        """Record `nbytes` produced (PRODUCER_BYTE_RATE) or fetched (CONSUMER_BYTE_RATE)
        by the user and client id; how long the client is to be throttled, 0 if not.
        Without `count_when_over`, bytes that take the rate over the quota are not
        counted (a throttled Fetch is answered empty)."""
        if key not in self.byte_rate_keys:
            return 0  # no quota of this kind anywhere: nothing to measure
        found = self._quota_of(key, user, client_id)
        if found is None:
            return 0
        quota, shared_user, shared_client = found
        now_ms = int(time.time() * 1000)
        rate = self._rates.get((key, shared_user, shared_client))
        if rate is None:
            if len(self._rates) >= MAX_RATES:  # clients come and go (a default quota per client id)
                self._rates = {k: r for k, r in self._rates.items()
                               if now_ms - r.samples[-1][0] < SAMPLES * WINDOW_MS}
            rate = self._rates[(key, shared_user, shared_client)] = _Rate()
        measured = rate.record(nbytes, now_ms)
        if measured <= quota:
            return 0
        if not count_when_over:
            rate.unrecord(nbytes)
        throttle = (measured - quota) / quota * rate.window_ms(now_ms)
        return max(1, int(min(throttle, SAMPLES * WINDOW_MS)))


def _order(item: tuple[Entity, dict[str, float]]) -> tuple:
    return tuple((t, n is not None, n or "") for t, n in item[0])
