"""The structured fuzzer, seeded and bounded for the test suite (`make fuzz` sends a
million frames): every API version, every mutation class, each frame on a fresh
connection; after each class the broker is alive, under 512 MiB, back to its
descriptors, and serves a produce and a fetch; its log has no error event.

Checked by breaking it: `raise Exception("boom")` at the top of the DescribeLogDirs
handler (an exception whose traceback has no "Error" in it, which the old count by
traceback text missed): the test fails with the handler's error events counted."""

from __future__ import annotations

from tests.fuzz.fuzzer import MUTATIONS, REFERENCE_DIAMOND, fuzz, handler_errors
from tests.schema_samples import every_supported_request


def test_no_mutated_request_takes_the_broker_down(fresh_broker):
    # Auto-creation off: a mutated Metadata request would otherwise create a topic per
    # random name, which is the broker doing its job, not surviving bad input.
    # JSON logs: the broker's own error events are counted, whatever the exception.
    broker = fresh_broker(auto_create_topics_enable="false", log_format="json",
                          schema_registry_listeners="http://127.0.0.1:0")
    topic = broker.create_topic("fuzz-canary")
    report = fuzz(broker.bootstrap, broker.process.pid, topic, seed=20261123, per_target=2,
                  registry_url=broker.schema_registry_url)
    assert set(report.sent) == set(MUTATIONS) | {REFERENCE_DIAMOND}
    assert sum(report.sent[kind] for kind in MUTATIONS) == 2 * len(MUTATIONS) * len(every_supported_request())
    assert report.sent[REFERENCE_DIAMOND] >= 2 * 3  # two diamonds: a leaf, a level, a top at least
    assert broker.process.poll() is None
    assert max(report.resident_mib) < 512
    # Refused requests close their connection; none reaches a handler and breaks it.
    # The count is of the broker's error events: it sees the 'closing connection'
    # warnings (so the log is being read) and no error.
    assert '"event": "closing connection"' in broker.log()
    assert not handler_errors(broker.log())
