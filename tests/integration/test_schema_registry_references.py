"""A diamond of shared schema references, sent as an attacker would (issue 40 point 2):
a leaf, three subjects with 300 references each to the one before, then six
registrations of 300 references to the last. Walked once per schema, each registration
reads 1,200 references; walked per path, the first of the six was 300^4 and never
ended, while every other client of the broker waited on the loop it shared with the
walk, and an acks=all produce on an fsync.on.ack broker waited on the thread pool the
parse filled.

Break-and-see-it-fail: on main (b8b7895) the first of the six registrations did not
answer within the HTTP client's 60 s (TimeoutError) and the test failed; with the walk
expanding a schema again on every path (the `reached` lookup of
schema_types.referenced_schemas skipped), the bound on references followed refused
the third level (42209) and it failed too.
"""

from __future__ import annotations

import json
import threading
import uuid

from confluent_kafka import Producer

from ottla.testing import BrokerProcess

from ..schema_registry_http import RegistryHttp
from ..wire import WireClient, request

WIDTH = 300
LEVELS = 3
REGISTRATIONS = 6


def _json_schema(title: str) -> str:
    return json.dumps({"type": "object", "title": title})


def _references(subject: str, level: int) -> list[dict[str, object]]:
    return [{"name": f"level{level}/r{i}.json", "subject": subject, "version": 1} for i in range(WIDTH)]


def test_a_reference_diamond_registers_while_every_other_client_is_served(tmp_path) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), {"schema.registry.listeners": "http://127.0.0.1:0",
                                                    "fsync.on.ack": "true"}).start()
    try:
        http = RegistryHttp(broker.schema_registry_url)
        prefix = f"d-{uuid.uuid4().hex[:8]}"
        assert http.register(f"{prefix}-leaf", _json_schema("leaf"), schemaType="JSON")[0] == 200
        below = f"{prefix}-leaf"
        for level in range(LEVELS):
            subject = f"{prefix}-{level}"
            status, body = http.register(subject, _json_schema(subject), schemaType="JSON",
                                         references=_references(below, level))
            assert status == 200, body
            below = subject

        answers: list[tuple[int, object]] = []
        failures: list[BaseException] = []

        def register_the_six() -> None:
            try:
                for n in range(REGISTRATIONS):
                    answers.append(http.register(f"{prefix}-top{n}", _json_schema(f"top{n}"), schemaType="JSON",
                                                 references=_references(below, LEVELS)))
            except BaseException as exc:  # the HTTP client's timeout: the walk did not end
                failures.append(exc)

        registering = threading.Thread(target=register_the_six)
        registering.start()
        # Another client's ApiVersions, and an acks=all produce (fsync'd before it is
        # answered), keep being answered while the six register: each has the socket's
        # and the producer's own generous timeouts, no tight bound.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 30000})
        probes = produced = 0
        delivered: list[object] = []
        with WireClient(broker.bootstrap, timeout=30) as probe:
            while True:
                answer = probe.call(request(18, 3, client_software_name="probe", client_software_version="1"))
                assert answer.error_code == 0
                probes += 1
                producer.produce("diamond-probe", b"x", on_delivery=lambda err, msg: delivered.append(err))
                produced += 1
                assert producer.flush(30) == 0
                if not registering.is_alive():
                    break
        registering.join()
        assert not failures, failures
        assert [status for status, _ in answers] == [200] * REGISTRATIONS, answers
        assert len({body["id"] for _, body in answers}) == REGISTRATIONS  # type: ignore[index]
        assert probes >= 1 and delivered == [None] * produced
        got = http.get(f"/subjects/{prefix}-top0/versions/1")[1]
        assert len(got["references"]) == WIDTH
    finally:
        broker.stop()
        broker.cleanup()
