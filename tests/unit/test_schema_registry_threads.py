"""Where the registry parses (issue 40 point 2): in its own worker thread, never on the
event loop (a handler meeting a schema not parsed for its request raises NotPrepared,
and rest.py parses it in the worker), and never in a pool the log's fsyncs wait on.

Break-and-see-it-fail: with `prepare_schema` back on asyncio.to_thread and the group
commit's fsync too (the shared default pool, as on main), eight parses held in the
pool kept the fsync from running until the 60 s wait gave up, and both tests failed
(parses seen on asyncio_0); with `_parse` parsing on the loop when nothing was
prepared, test_a_stored_schema_is_parsed_in_the_worker failed (no NotPrepared); with
`stored_parse` parsing a schema not kept yet itself, the console's decoder parsed on the
loop and test_the_consoles_decoder_never_parses_on_the_loop failed.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from ottla.broker.durability import GroupCommit
from ottla.console.schema_decoding import SchemaDecoder
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.schema_registry import registry as registry_module
from ottla.schema_registry.protobuf import ProtobufSchema
from ottla.schema_registry.registry import NotPrepared, SchemaRegistry, start_request
from ottla.schema_registry.store import SchemaStore
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

SCHEMA = {"schema": json.dumps({"type": "object", "title": "t"}), "schemaType": "JSON"}


@pytest.fixture
def logs(tmp_path):
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    yield logs
    logs.close()


@pytest.fixture
def registry(logs):
    store = SchemaStore(logs)
    store.open()
    registry = SchemaRegistry(store)
    yield registry
    registry.close()


def _threads_of_parse(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = registry_module.parse

    def parse(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry_module, "parse", parse)
    return seen


async def test_a_stored_schema_is_parsed_in_the_worker(registry: SchemaRegistry,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _threads_of_parse(monkeypatch)
    start_request()
    await registry.prepare("s", SCHEMA, False)
    assert registry.register("s", SCHEMA) == {"id": 1}
    # A new request meets the stored version (a compatibility check compares with it):
    # not parsed for this request, so the handler does not parse it on the loop.
    start_request()
    with pytest.raises(NotPrepared) as missing:
        registry.check_compatibility("s", "latest", {**SCHEMA, "schema": json.dumps({"type": "object"})})
    await registry.prepare_schema(missing.value.schema, missing.value.normalize)
    await registry.prepare("s", {**SCHEMA, "schema": json.dumps({"type": "object"})}, False)
    assert registry.check_compatibility("s", "latest", {**SCHEMA, "schema": json.dumps({"type": "object"})}) \
        == {"is_compatible": True}
    assert seen and all(name.startswith("ottla-registry") for name in seen), seen


async def test_a_busy_parser_holds_no_fsync(registry: SchemaRegistry, logs: LogManager,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real = registry_module.parse

    def held_parse(*args, **kwargs):
        release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry_module, "parse", held_parse)
    parses = [asyncio.ensure_future(registry.prepare_schema(registry._requested_schema(
        {**SCHEMA, "schema": json.dumps({"title": str(i)})}), False)) for i in range(8)]
    commit = GroupCommit(logs)
    log = logs.create_topic("t", 1).partitions[0]
    log.on_append = commit.appended
    data = build_batch([encode_record(None, b"v")], timestamp=0)
    log.append_batch(data, BatchHeader.parse(data))
    try:
        await asyncio.wait_for(commit.sync(), 60)  # on a shared pool it waits for the parses
        assert log.flushed_offset == log.log_end_offset and not any(p.done() for p in parses)
    finally:
        release.set()
        await asyncio.gather(*parses)


async def test_the_consoles_decoder_never_parses_on_the_loop(registry: SchemaRegistry,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    start_request()
    await registry.prepare("s", SCHEMA, False)
    assert registry.register("s", SCHEMA) == {"id": 1}
    seen = _threads_of_parse(monkeypatch)
    record = b"\0" + (1).to_bytes(4, "big") + b'{"a": 1}'
    # A page's decoder (console/schema_decoding.py) meets the schema first: noted.
    first = SchemaDecoder(registry.state, lambda subject: True, registry.stored_parse).decode(record)
    assert first is not None and "is being parsed" in first.note and first.text is None and not seen
    # The admin endpoint has the registry parse what was noted, in its worker, and
    # renders the page again.
    assert await registry.parse_wanted() and not await registry.parse_wanted()
    again = SchemaDecoder(registry.state, lambda subject: True, registry.stored_parse).decode(record)
    assert again is not None and again.text is not None and '"a": 1' in again.text
    assert seen and all(name.startswith("ottla-registry") for name in seen), seen


async def test_a_protobuf_schemas_descriptors_are_built_in_the_worker(registry: SchemaRegistry,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime's descriptors of a PROTOBUF schema (tens of milliseconds for thousands
    of messages, once per record before) are built in the worker, even for a schema
    parsed already for a compatibility check; the console decodes with them."""
    v1 = {"schema": 'syntax = "proto3"; package p; message M { int32 a = 1; }', "schemaType": "PROTOBUF"}
    v2 = {"schema": 'syntax = "proto3"; package p; message M { int32 a = 1; string b = 2; }',
          "schemaType": "PROTOBUF"}
    start_request()
    await registry.prepare("p", v1, False)
    assert registry.register("p", v1) == {"id": 1}
    start_request()
    await registry.prepare("p", v2, False)
    assert registry.check_compatibility("p", "latest", v2) == {"is_compatible": True}  # keeps v1's parse
    built: list[str] = []
    real = ProtobufSchema.pool

    def pool(self: ProtobufSchema):
        if not self.has_pool:
            built.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(ProtobufSchema, "pool", pool)
    record = b"\0" + (1).to_bytes(4, "big") + b"\0" + b"\x08\x05"  # no message indexes (the first), a = 5
    first = SchemaDecoder(registry.state, lambda subject: True, registry.stored_parse).decode(record)
    assert first is not None and "is being parsed" in first.note and not built
    assert await registry.parse_wanted()
    again = SchemaDecoder(registry.state, lambda subject: True, registry.stored_parse).decode(record)
    assert again is not None and again.text is not None and '"a": 5' in again.text, again
    assert built and all(name.startswith("ottla-registry") for name in built), built


async def test_the_first_serialized_get_parses_in_the_worker(registry: SchemaRegistry,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`?format=serialized` of a stored PROTOBUF schema not parsed yet: the handler does
    not compile it on the loop (NotPrepared; rest.py parses it in the worker and asks
    again), and the answer is the compiled descriptor."""
    body = {"schema": 'syntax = "proto3"; package q; message Q { int32 a = 1; }', "schemaType": "PROTOBUF"}
    start_request()
    await registry.prepare("q", body, False)
    assert registry.register("q", body) == {"id": 1}
    seen = _threads_of_parse(monkeypatch)
    start_request()
    by_id = lambda: registry.schema_by_id(1, "serialized")  # noqa: E731
    by_version = lambda: registry.get_version("q", "1", fmt="serialized")  # noqa: E731
    for ask in (by_id, by_version):
        with pytest.raises(NotPrepared) as missing:
            ask()
        assert not seen
    await registry.prepare_schema(missing.value.schema, missing.value.normalize)
    assert by_id()["schema"] == by_version()["schema"]
    assert seen and all(name.startswith("ottla-registry") for name in seen), seen
