"""The broker's metrics, rendered in Prometheus' text format for /metrics.

Two kinds of numbers:

- counters the request path keeps (requests, error codes answered, latency histogram,
  bytes in and out, connections, injected faults): per request, a few dict increments
  and one perf_counter pair in the connection; nothing per record;
- gauges read from the broker's state when /metrics is scraped (partitions, log end
  offset and last stable offset per partition, open transactions, producer ids,
  consumer groups, connections): they cost nothing between scrapes.

Error codes are counted as Kafka's ErrorsPerSec does: every error code in a response,
top-level and per topic or partition, under the API that answered it.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import cache
from typing import TYPE_CHECKING, Any

from ottla.coordinator.transaction_log import TxnState
from ottla.protocol import compiled_codec
from ottla.protocol.apis import SUPPORTED
from ottla.protocol.codec import Encoded
from ottla.protocol.errors import ErrorCode
from ottla.protocol.kio_schema import EntityField, EntityTupleField, classify_field

from .security.tls import failed_handshakes

if TYPE_CHECKING:
    from ottla.coordinator.groups import GroupCoordinator
    from ottla.coordinator.transactions import TransactionCoordinator
    from ottla.storage.log_manager import LogManager

    from .fetch_sessions import FetchSessionCache

# Request latency buckets, in seconds: a produce answered from the page cache takes well
# under a millisecond, a long-polling fetch up to its max wait (500 ms by default).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_OPEN_TXN_STATES = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)


# Slots, as Metrics': broker/network/_pipeline.c counts a request at their offsets
# (compiled_pipeline.METRICS_SLOTS).
@dataclass(slots=True)
class ApiMetrics:
    requests: int = 0
    errors: Counter[ErrorCode] = field(default_factory=Counter)
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    seconds: float = 0.0


class Metrics:
    __slots__ = ("apis", "bytes_in", "bytes_out", "connections_opened", "connection_errors", "faults_injected",
                 "authentication_failures")

    def __init__(self) -> None:
        self.apis: dict[int, ApiMetrics] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_opened = 0
        self.connection_errors = 0
        self.faults_injected: Counter[tuple[str, str]] = Counter()
        self.authentication_failures: Counter[str] = Counter()  # by SASL mechanism

    def authentication_failed(self, mechanism: str) -> None:
        self.authentication_failures[mechanism] += 1

    def request_served(self, api_key: int, seconds: float, response: Any) -> None:
        api = self.apis.get(api_key)
        if api is None:
            api = self.apis[api_key] = ApiMetrics()
        api.requests += 1
        api.seconds += seconds
        api.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        if response is not None:
            if response.__class__ is Encoded:  # a response encoded ahead of time: its entity's
                response = response.entity
            if _error_codes_in_c is None:
                _count_errors(response, type(response), api.errors)
            else:
                cls: type = type(response)
                codes = _error_codes_in_c(_nested_error_plan(cls), response)
                if codes is not None:
                    api.errors.update(codes)

    # --- rendering -----------------------------------------------------------------------

    def render(self, *, connections: int, logs: LogManager, transactions: TransactionCoordinator | None,
               groups: GroupCoordinator, faults_armed: int, task_failures: Counter[str] | None = None,
               fetch_sessions: FetchSessionCache | None = None) -> str:
        """The counters, and the gauges read now from the state they describe."""
        out: list[str] = []
        api_names = {key: api.name for key, api in SUPPORTED.items()}

        def name(key: int) -> str:
            return api_names.get(key, str(key))

        _family(out, "ottla_requests_total", "counter", "Requests served, by API.",
                ((f'api="{name(k)}"', a.requests) for k, a in sorted(self.apis.items())))
        _family(out, "ottla_request_errors_total", "counter",
                "Error codes answered, by API and error (each topic and partition counts).",
                ((f'api="{name(k)}",error="{code.name.upper()}"', n)
                 for k, a in sorted(self.apis.items()) for code, n in sorted(a.errors.items())))
        out.append("# HELP ottla_request_duration_seconds Time from a request's arrival to its response.")
        out.append("# TYPE ottla_request_duration_seconds histogram")
        for key, api in sorted(self.apis.items()):
            cumulative = 0
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), api.buckets, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                out.append(f'ottla_request_duration_seconds_bucket{{api="{name(key)}",le="{le}"}} {cumulative}')
            out.append(f'ottla_request_duration_seconds_sum{{api="{name(key)}"}} {api.seconds}')
            out.append(f'ottla_request_duration_seconds_count{{api="{name(key)}"}} {api.requests}')
        _family(out, "ottla_bytes_in_total", "counter", "Bytes received from clients.", [("", self.bytes_in)])
        _family(out, "ottla_bytes_out_total", "counter", "Bytes sent to clients.", [("", self.bytes_out)])
        _family(out, "ottla_connections", "gauge", "Open client connections.", [("", connections)])
        _family(out, "ottla_connections_total", "counter", "Client connections accepted.",
                [("", self.connections_opened)])
        _family(out, "ottla_connection_errors_total", "counter",
                "Connections closed because of an error (bad frame, reset...).", [("", self.connection_errors)])
        _family(out, "ottla_tls_handshake_failures_total", "counter",
                "TLS handshakes that failed (plaintext clients, unknown certificates...).",
                [("", failed_handshakes())])
        _family(out, "ottla_sasl_authentication_failures_total", "counter",
                "SASL authentications refused, by mechanism.",
                ((f'mechanism="{m}"', n) for m, n in sorted(self.authentication_failures.items())))

        partitions = sorted(logs.all_partitions(), key=lambda p: (p.topic, p.partition))
        _family(out, "ottla_partitions", "gauge", "Partitions hosted.", [("", len(partitions))])
        _family(out, "ottla_log_end_offset", "gauge", "Log end offset (the high watermark) per partition.",
                ((_tp(p), p.log_end_offset) for p in partitions))
        _family(out, "ottla_last_stable_offset", "gauge", "Last stable offset per partition (read_committed's end).",
                ((_tp(p), p.last_stable_offset) for p in partitions))
        producers = {pid for p in partitions for pid in p.producer_state.producers}
        _family(out, "ottla_producer_ids", "gauge", "Producer ids with state in some partition.",
                [("", len(producers))])
        txn_states = transactions.count_by_state() if transactions is not None else Counter()
        _family(out, "ottla_open_transactions", "gauge", "Transactions begun and not yet complete.",
                [("", sum(txn_states[state] for state in _OPEN_TXN_STATES))])
        _family(out, "ottla_transactional_ids", "gauge", "Transactional ids known to the coordinator.",
                [("", sum(txn_states.values()))])
        group_states = groups.count_by_state()
        _family(out, "ottla_consumer_groups", "gauge", "Consumer groups, by state.",
                ((f'state="{state}"', n) for state, n in sorted(group_states.items())))
        if fetch_sessions is not None:
            _family(out, "ottla_fetch_sessions", "gauge", "Incremental fetch sessions (KIP-227) cached.",
                    [("", len(fetch_sessions.sessions))])
            _family(out, "ottla_fetch_session_partitions", "gauge", "Partitions held by the cached fetch sessions.",
                    [("", fetch_sessions.partitions)])
            _family(out, "ottla_fetch_session_evictions_total", "counter",
                    "Fetch sessions taken out of a full cache for a new one.", [("", fetch_sessions.evictions)])
        _family(out, "ottla_faults_injected_total", "counter", "Faults injected, by kind and API.",
                ((f'kind="{kind}",api="{api}"', n) for (kind, api), n in sorted(self.faults_injected.items())))
        _family(out, "ottla_faults_armed", "gauge", "Injections still to come from the faults set.",
                [("", faults_armed)])
        _family(out, "ottla_background_task_failures_total", "counter",
                "Runs of a background task (compaction, retention, ...) that failed; it runs again.",
                ((f'task="{task}"', n) for task, n in sorted((task_failures or {}).items())))
        return "\n".join(out) + "\n"


def _tp(partition: Any) -> str:
    return f'topic="{partition.topic}",partition="{partition.partition}"'


def _family(out: list[str], metric: str, kind: str, help_text: str, samples: Iterable[tuple[str, Any]]) -> None:
    out.append(f"# HELP {metric} {help_text}")
    out.append(f"# TYPE {metric} {kind}")
    for labels, value in samples:
        out.append(f"{metric}{{{labels}}} {value}" if labels else f"{metric} {value}")


# --- error codes in a response -------------------------------------------------------------


@cache
def _error_plan(cls: type) -> tuple[tuple[str, type | None, bool], ...]:
    """(field, nested class or None for an error code, is an array) for the fields of
    `cls` that hold an error code or lead to one; computed once per response class."""
    plan: list[tuple[str, type | None, bool]] = []
    for f in fields(cls):
        if f.metadata.get("kafka_type") == "error_code":
            plan.append((f.name, None, False))
            continue
        kind = classify_field(f)
        if isinstance(kind, (EntityField, EntityTupleField)) and _error_plan(kind.type_):
            plan.append((f.name, kind.type_, isinstance(kind, EntityTupleField)))
    return tuple(plan)


@cache
def _nested_error_plan(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """_error_plan with each nested class replaced by its own plan: what _codec's
    error_codes walks on the compiled path (protocol/compiled_codec.py)."""
    return tuple((name, None if nested is None else _nested_error_plan(nested), many)
                 for name, nested, many in _error_plan(cls))


_error_codes_in_c = compiled_codec.compiled.error_codes if compiled_codec.ENABLED else None


def _count_errors(entity: Any, cls: type, counts: Counter[ErrorCode]) -> None:
    for name, nested, many in _error_plan(cls):
        value = getattr(entity, name)
        if nested is None:
            if value:  # ErrorCode.none is 0
                counts[value] += 1
        elif value is not None:
            for item in value if many else (value,):
                _count_errors(item, nested, counts)
