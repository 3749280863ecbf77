"""structlog output of a real broker: JSON lines for machines, console lines for people;
one start-up line with the bootstrap address, the partitions recovered and the time it
took; a line per connection error naming the client id."""

from __future__ import annotations

import json
import struct

from tests.clients import create_topic, idempotent_producer, produce_all
from tests.wire import WireClient


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_json_lines_with_the_start_up_summary_and_connection_errors(fresh_broker, topic_name):
    broker = fresh_broker(log_format="json")
    create_topic(broker.bootstrap, topic_name, partitions=3)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, b"x") for p in range(3)])
    broker.kill()  # unclean: the next start recovers
    broker.start()

    lines = json_lines(broker.log())
    assert len(lines) == len([line for line in broker.log().splitlines() if line.strip()]), "every line is JSON"
    ready = [line for line in lines if line["event"] == "ottla ready"]
    assert len(ready) == 2
    assert ready[0]["clean_start"] is True, "a brand-new data directory has nothing to recover"
    second = ready[1]
    assert second["bootstrap"] == broker.bootstrap
    assert second["partitions"] >= 3 and second["clean_start"] is False
    assert isinstance(second["startup_seconds"], float)
    assert second["level"] == "info" and "timestamp" in second
    # The coordinators load after the broker is ready, and say when they are done.
    loaded = [line for line in lines if line["event"] == "coordinators loaded"]
    assert len(loaded) == 2 and isinstance(loaded[1]["seconds"], float)
    assert loaded[1]["transactional_ids"] == 0 and loaded[1]["groups"] == 0

    # A frame with an API key no broker knows: the connection is closed, with a line
    # that names the client.
    with WireClient(broker.bootstrap) as client:
        body = struct.pack(">hhih", 9999, 0, 7, len(b"bad-client")) + b"bad-client"
        client.send_raw(struct.pack(">i", len(body)) + body)
        assert client.is_closed()
    errors = [line for line in json_lines(broker.log()) if line["event"] == "closing connection"]
    assert errors and errors[-1]["client_id"] == "bad-client" and errors[-1]["level"] == "warning"
    assert "unknown api key 9999" in errors[-1]["reason"]


def test_console_lines_for_people(fresh_broker):
    broker = fresh_broker()
    ready = [line for line in broker.log().splitlines() if "ottla ready" in line]
    assert len(ready) == 1 and not ready[0].startswith("{")
    assert f"bootstrap={broker.bootstrap}" in ready[0] and "startup_seconds=" in ready[0]
    assert "partitions=" in ready[0] and "[info" in ready[0]
