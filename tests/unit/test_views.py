"""The typed request and response views (protocol/views), generated from kio's schema."""

from __future__ import annotations

import pathlib

from kio.schema.list_offsets.v1 import request as v1
from kio.schema.list_offsets.v2 import request as v2

from ottla.protocol import apis
from ottla.protocol.codec import request_class
from ottla.protocol.generate_views import VIEWS, generate


def test_the_checked_in_views_are_what_the_generator_writes() -> None:
    # A kio upgrade or a newly served version changes them: run
    # `python -m ottla.protocol.generate_views` and commit what it writes.
    wanted = generate()
    found = {path.name: path.read_text() for path in pathlib.Path(VIEWS).glob("*.py") if path.name != "__init__.py"}
    assert sorted(found) == sorted(wanted)
    for name, source in wanted.items():
        assert found[name] == source, f"protocol/views/{name} differs from what generate_views.py writes"


def test_a_field_a_version_lacks_reads_as_its_default() -> None:
    # ListOffsets v1 has no isolation_level (v2+) and its partitions no
    # current_leader_epoch (v4+): once loaded for a request, they read as Kafka's
    # defaults, 0 and -1; v2 keeps the value it was sent.
    assert request_class(apis.LIST_OFFSETS.key, 1) is v1.ListOffsetsRequest
    assert request_class(apis.LIST_OFFSETS.key, 2) is v2.ListOffsetsRequest
    partition = v1.ListOffsetsPartition(partition_index=0, timestamp=-1)
    request = v1.ListOffsetsRequest(replica_id=-1, topics=(v1.ListOffsetsTopic(name="t", partitions=(partition,)),))
    assert request.isolation_level == 0
    assert request.topics[0].partitions[0].current_leader_epoch == -1
    assert v2.ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=()).isolation_level == 1
