"""A structured fuzzer for the broker's request path.

For every supported API and version it builds a well-formed request from kio's schema
classes (tests/schema_samples.py), then mutates it by class: truncation, bit flips,
huge int32 counts and lengths, huge varints, garbage after the body, tagged fields
whose size and value disagree, a body of random bytes; and half-sent frames: a size
prefix (true, or announcing far more, up to 100 MiB) and part of the frame, then the
client vanishes or stalls with the socket open (issue 40). Each mutated frame goes to
the broker on a fresh connection. After each class the broker must still be running, under
the memory ceiling, back to its baseline of descriptors, and must still take a produce
and answer a fetch.

With the schema registry on, one more class goes over HTTP: reference diamonds
(`reference_diamonds`), levels of subjects each referencing the level below many times
over, walked per path an exponential amount of work; every registration must be
answered (registered, or refused with Confluent's 42201/42209), never fail or hang.

`make fuzz` runs a million frames (`python -m tests.fuzz.fuzzer --frames 1000000`)
against a broker of its own and prints what it sent and how long the broker took;
tests/fuzz/test_fuzz.py runs a seeded, bounded share in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.codec import request_class
from ottla.protocol.errors import ErrorCode
from tests.schema_registry_http import RegistryHttp
from tests.schema_samples import every_supported_request, sample_body
from tests.wire import WireClient, request

MAX_RESIDENT_MIB = 512
_INT32_LIES = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00")
_VARINT_LIES = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80\x80")


def _truncate(body: bytes, rng: random.Random) -> bytes:
    return body[: rng.randrange(len(body))] if body else body


def _bit_flips(body: bytes, rng: random.Random) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _huge_int32(body: bytes, rng: random.Random) -> bytes:
    if len(body) < 4:
        return rng.choice(_INT32_LIES)
    at = rng.randrange(len(body) - 3)
    return body[:at] + rng.choice(_INT32_LIES) + body[at + 4:]


def _huge_varint(body: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(body) + 1)
    return body[:at] + rng.choice(_VARINT_LIES) + body[at + 1:]


def _garbage_tail(body: bytes, rng: random.Random) -> bytes:
    return body + rng.randbytes(rng.randint(1, 64))


def _tag_lies(body: bytes, rng: random.Random) -> bytes:
    """A tagged value whose size says more than the value holds. Half the time a field of
    a one-field tag section of the body (count 1, one of the first tags, a size and that
    many bytes: a tagged value the sample set) gets a larger size and, after its value,
    an empty tag section and a huge count, or random bytes; the other half, one of the
    body's zero bytes (an empty tag section, maybe) becomes such a field with random
    bytes. A reader that goes on from the value's end instead of the size's meets a count
    no length check saw."""
    tagged = [i for i in range(len(body) - 2)
              if body[i] == 1 and body[i + 1] < 4 and 0 < body[i + 2] < 100 and i + 3 + body[i + 2] <= len(body)]
    if tagged and rng.random() < 0.5:
        at = rng.choice(tagged)
        end = at + 3 + body[at + 2]
        padding = rng.choice((b"\x00" + rng.choice(_VARINT_LIES), rng.choice(_VARINT_LIES), rng.randbytes(6)))
        return body[:at + 2] + bytes([body[at + 2] + len(padding)]) + body[at + 3:end] + padding + body[end:]
    zeros = [i for i, byte in enumerate(body) if byte == 0] or [len(body)]
    at = rng.choice(zeros)
    size = rng.randint(0, 40)
    return body[:at] + bytes([1, rng.randint(0, 3), size]) + rng.randbytes(size) + body[at + 1:]


def _random_body(body: bytes, rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(0, 2 * len(body) + 8))


def _half_sent(body: bytes, rng: random.Random) -> bytes:
    """The body whole: send_half cuts the frame as it sends it."""
    return body


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncation": _truncate,
    "bit-flips": _bit_flips,
    "huge-int32": _huge_int32,
    "huge-varint": _huge_varint,
    "garbage-tail": _garbage_tail,
    "tag-lies": _tag_lies,
    "random-body": _random_body,
    "half-sent": _half_sent,
}
# Sockets a half-sent frame leaves stalled at once (the oldest is closed past this).
_STALLED_AT_ONCE = 64
# Sizes a half-sent frame may announce instead of its own: a byte or 4 KiB more than
# its body, or 1 MiB, or socket.request.max.bytes's default (the most not refused).
_ANNOUNCED_LIES = (1, 4096)
_ANNOUNCED_SIZES = (1 << 20, 100 << 20)


def frame(api_key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz"
    if request_class(api_key, version).__flexible__:
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def send_one(host: str, port: int, data: bytes) -> None:
    """Send one frame on a fresh connection; wait for its answer, the broker closing the
    connection, or a moment of silence (acks=0, a long poll); close."""
    with socket.create_connection((host, port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(0.05)
            got = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return  # closed by the broker
                got += chunk
                if len(got) >= 4 and len(got) >= 4 + struct.unpack_from(">i", got)[0]:
                    return  # one whole response
        except (TimeoutError, ConnectionError):
            pass


def send_half(host: str, port: int, data: bytes, rng: random.Random, stalled: list[socket.socket]) -> None:
    """Send part of a frame (its size prefix true or a lie announcing more) on a fresh
    connection; then vanish (close) or stall (keep the socket open, up to
    _STALLED_AT_ONCE at once, the rest closed at the end of the class)."""
    lie = rng.random()
    if lie < 0.25:
        data = struct.pack(">i", len(data) - 4 + rng.choice(_ANNOUNCED_LIES)) + data[4:]
    elif lie < 0.5:
        data = struct.pack(">i", max(len(data) - 4, rng.choice(_ANNOUNCED_SIZES))) + data[4:]
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(data[:rng.randrange(len(data))])
    except (TimeoutError, ConnectionError):
        sock.close()
        return
    if rng.random() < 0.5:
        sock.close()
        return
    stalled.append(sock)
    if len(stalled) > _STALLED_AT_ONCE:
        stalled.pop(0).close()


@dataclass
class Report:
    sent: Counter[str] = field(default_factory=Counter)  # by mutation class
    by_api: Counter[int] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    resident_mib: list[float] = field(default_factory=list)


def resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def descriptors(pid: int) -> int:
    """Open descriptors other than partition files: a mutated request may well make the
    broker create __consumer_offsets (a group API's first use), whose files are the
    broker's, not a leak; a socket or any other file left open is."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if not target.endswith((".log", ".index", ".timeindex", ".txnindex")):
            count += 1
    return count


def check_health(bootstrap: str, pid: int, topic: str, baseline_fds: int, after: str, padding: int = 0) -> float:
    """The broker is alive, under the ceiling, back to its descriptors, and serves a
    produce (of a record `padding` bytes longer than the class's name) and a fetch.
    Returns its resident MiB."""
    os.kill(pid, 0)  # raises if the process is gone
    rss = resident_mib(pid)
    assert rss < MAX_RESIDENT_MIB, f"after {after}: {rss:.0f} MiB resident"
    deadline = time.monotonic() + 15
    while descriptors(pid) > baseline_fds + 10:
        assert time.monotonic() < deadline, f"after {after}: {descriptors(pid)} descriptors, baseline {baseline_fds}"
        time.sleep(0.1)
    with WireClient(bootstrap) as client:
        value = after.encode() + b"." * padding
        batch = build_batch([encode_record(None, value, offset_delta=0)], timestamp=int(time.time() * 1000))
        produced = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
        result = produced.responses[0].partition_responses[0]
        assert result.error_code == ErrorCode.none, f"after {after}: produce answered {result.error_code}"
        fetched = client.call(request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                          {"topic": topic, "partitions": [
                                              {"partition": 0, "fetch_offset": result.base_offset,
                                               "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                                               "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                                      forgotten_topics_data=[], rack_id=""))
        assert value in fetched.responses[0].partitions[0].records, f"after {after}: fetch lost the record"
    return rss


REFERENCE_DIAMOND = "reference-diamond"
# Diamonds in one run: each is some hundred milliseconds of registrations (a million
# frames would otherwise make hundreds of them).
MAX_DIAMONDS = 50
_DIAMOND_TYPES = ("JSON", "AVRO", "PROTOBUF")


def _diamond_schema(schema_type: str, name: str, below: str | None) -> str:
    if schema_type == "JSON":
        return json.dumps({"type": "object", "title": name})
    if schema_type == "AVRO":
        field_type = below if below is not None else "int"
        return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": field_type}]})
    return f'syntax = "proto3";\npackage {name.lower()};\nmessage {name} {{ int32 f = 1; }}\n'


def _diamond_references(schema_type: str, where: str, width: int, subject: str,
                        below_name: str) -> list[dict[str, object]]:
    """`width` references to version 1 of `subject`, each under a name of its own (AVRO
    names the type it takes from it)."""
    def name(i: int) -> str:
        if schema_type == "AVRO":
            return below_name
        return f"{where}/r{i}.{'proto' if schema_type == 'PROTOBUF' else 'json'}"
    return [{"name": name(i), "subject": subject, "version": 1} for i in range(width)]


def reference_diamonds(registry: RegistryHttp, rng: random.Random, rounds: int, tag: str) -> int:
    """`rounds` diamonds: a leaf, then three levels of a subject with 100 to 300
    references (each a name of its own; PROTOBUF 10 to 40) to the subject below, then up
    to three schemas referencing the last level as widely: 10^8 paths and more, where a
    walk once per schema reads a few hundred references. Now and then a level has a
    reference to a version that does not exist, or is so wide that the references
    followed pass the registry's bound; the first diamond is always whole. Each answer
    must be 200, or 422 with 42201 (invalid) or 42209 (too large). The number of
    requests sent."""
    sent = 0

    def register(subject: str, schema_type: str, text: str, references: list[dict[str, object]]) -> bool:
        nonlocal sent
        status, body = registry.register(subject, text, schemaType=schema_type, references=references)
        sent += 1
        assert status == 200 or (status == 422 and body.get("error_code") in (42201, 42209)), (subject, status, body)
        return status == 200

    for n in range(rounds):
        schema_type = rng.choice(_DIAMOND_TYPES) if n else "JSON"
        # protoc writes every file a schema's references bring: fewer for PROTOBUF.
        narrowest, widest = (10, 40) if schema_type == "PROTOBUF" else (100, 300)
        prefix = f"fuzz-{tag}-{n}"
        below, below_name = f"{prefix}-leaf", f"L{n}x0"
        register(below, schema_type, _diamond_schema(schema_type, below_name, None), [])
        for level in range(1, 4):
            wide = n > 0 and rng.random() < 0.1  # past the bound on references followed
            width = 10_001 if wide else rng.randint(narrowest, widest)
            references = _diamond_references(schema_type, f"l{level}", width, below, below_name)
            if n > 0 and rng.random() < 0.1:
                references[rng.randrange(width)]["version"] = 99  # no such version
            name, subject = f"L{n}x{level}", f"{prefix}-{level}"
            if not register(subject, schema_type, _diamond_schema(schema_type, name, below_name), references):
                break  # refused: the next level builds on the one below
            below, below_name = subject, name
        for top in range(rng.randint(1, 3)):
            references = _diamond_references(schema_type, "top", rng.randint(narrowest, widest), below, below_name)
            register(f"{prefix}-top{top}", schema_type, _diamond_schema(schema_type, f"T{n}x{top}", below_name),
                     references)
    return sent


def fuzz(bootstrap: str, pid: int, topic: str, *, seed: int, per_target: int,
         progress: Callable[[str], None] | None = None, registry_url: str | None = None) -> Report:
    """`per_target` frames of each mutation class for each API version, class by class,
    with a health check after each class; with `registry_url`, `per_target` reference
    diamonds after them (MAX_DIAMONDS at most)."""
    rng = random.Random(seed)
    host, port_text = bootstrap.rsplit(":", 1)
    port = int(port_text)
    targets = every_supported_request()
    bodies = {target: [sample_body(*target, rng) for _ in range(3)] for target in targets}
    baseline_fds = descriptors(pid)
    report = Report()
    correlation_id = 0
    for kind, mutate in MUTATIONS.items():
        started = time.monotonic()
        stalled: list[socket.socket] = []
        for _ in range(per_target):
            for api_key, version in targets:
                correlation_id += 1
                body = mutate(rng.choice(bodies[(api_key, version)]), rng)
                if mutate is _half_sent:
                    send_half(host, port, frame(api_key, version, body, correlation_id), rng, stalled)
                else:
                    send_one(host, port, frame(api_key, version, body, correlation_id))
                report.sent[kind] += 1
                report.by_api[api_key] += 1
        # The broker serves others while these stall, a produce past the 64 KiB that
        # may always be read included (issue 40: three announced 100 MiB frames made a
        # 200 KB produce wait); then they vanish too.
        if stalled:
            check_health(bootstrap, pid, topic, baseline_fds + len(stalled), f"{kind} (stalled)", padding=200_000)
        for sock in stalled:
            sock.close()
        report.seconds[kind] = time.monotonic() - started
        report.resident_mib.append(check_health(bootstrap, pid, topic, baseline_fds, kind))
        if progress is not None:
            progress(f"{kind:<13} {report.sent[kind]:>9,} frames in {report.seconds[kind]:7.1f} s, "
                     f"broker at {report.resident_mib[-1]:.0f} MiB, serving")
    if registry_url is not None:
        started = time.monotonic()
        report.sent[REFERENCE_DIAMOND] += reference_diamonds(RegistryHttp(registry_url), rng,
                                                             min(per_target, MAX_DIAMONDS), str(seed))
        report.seconds[REFERENCE_DIAMOND] = time.monotonic() - started
        report.resident_mib.append(check_health(bootstrap, pid, topic, baseline_fds, REFERENCE_DIAMOND))
        if progress is not None:
            progress(f"{REFERENCE_DIAMOND} {report.sent[REFERENCE_DIAMOND]:>5,} requests in "
                     f"{report.seconds[REFERENCE_DIAMOND]:7.1f} s, broker at {report.resident_mib[-1]:.0f} MiB, "
                     "serving")
    return report


def handler_errors(log: str) -> Counter[str]:
    """The broker's own error events (level error or critical) in a log written with
    `log.format=json`, counted by event, API and the exception's last line: bugs the
    fuzzer found that cost only their connection. Every JSON line of the log is
    read as the event it is; whatever the exception is called, it counts."""
    found: Counter[str] = Counter()
    for line in log.splitlines():
        if not line.startswith("{"):
            continue  # not an event of the broker's (an interpreter's dying words would be)
        try:
            event = json.loads(line)
        except ValueError:
            found[f"unreadable log line: {line[:160]}"] += 1
            continue
        if event.get("level") in ("error", "critical"):
            exception = (event.get("exception") or "").strip().splitlines()
            found[f"{event.get('api', '?')}: {event.get('event')}: {exception[-1][:160] if exception else ''}"] += 1
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.fuzzer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000, help="frames to send in all (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    from ottla.testing import BrokerProcess

    targets = len(every_supported_request())
    per_target = max(1, args.frames // (targets * len(MUTATIONS)))
    data_dir = tempfile.mkdtemp(prefix="ottla-fuzz-")
    broker = BrokerProcess(data_dir, {"auto.create.topics.enable": "false", "log.format": "json",
                                      "schema.registry.listeners": "http://127.0.0.1:0"}).start()
    try:
        topic = broker.create_topic("fuzz-canary")
        print(f"fuzzing {targets} API versions x {len(MUTATIONS)} mutation classes x {per_target} "
              f"= {targets * len(MUTATIONS) * per_target:,} frames, seed {args.seed}, each on a fresh connection",
              flush=True)
        started = time.monotonic()
        report = fuzz(broker.bootstrap, broker.process.pid, topic, seed=args.seed, per_target=per_target,
                      progress=lambda line: print(line, flush=True), registry_url=broker.schema_registry_url)
        total = sum(report.sent[kind] for kind in MUTATIONS)  # the reference diamonds are HTTP requests
        elapsed = time.monotonic() - started
        print(f"{total:,} frames in {elapsed:.0f} s ({total / elapsed:,.0f} frames/s); the broker never died, "
              f"peak {max(report.resident_mib):.0f} MiB resident; frames per API key: "
              + ", ".join(f"{key}: {n:,}" for key, n in sorted(report.by_api.items())), flush=True)
        log = broker.log()
        print(f"connections closed for bad input: {log.count('closing connection'):,}; "
              f"error events: {sum(handler_errors(log).values()):,}", flush=True)
        for error, count in handler_errors(log).most_common():
            print(f"  {count:>6,} x {error}", flush=True)
    finally:
        broker.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
