"""How long a SCRAM SASL handshake takes on the broker (issue 35: the server side moved
to the scramp library; nothing may be slower).

    python -m bench.scram_handshake [--handshakes 200] [--rounds 5] [--in-process]

One broker with a SASL_PLAINTEXT listener and a user for SCRAM-SHA-256 and SCRAM-SHA-512
(4096 iterations, Kafka's default). Each handshake is a new TCP connection, SaslHandshake
v1 and the two SaslAuthenticate round trips, timed from connecting to the server's final
message. The client side is the same in every run (scramp's client, which derives the
salted password on every handshake as a real client does), so what changes between two
commits is the broker's side. Median and 95th percentile per
mechanism, over interleaved rounds.

--in-process times the broker's side alone, without a socket: ScramServer's two steps
per handshake (the client's messages are computed between them, untimed).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import tempfile
import time

from scramp import ScramClient

from ottla.protocol.codec import decode_response, encode_request, request_class
from ottla.protocol.entities import make
from ottla.testing import BrokerProcess
from ottla.tools.client import recv_exactly

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
USER, PASSWORD = "bench", "bench-secret"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _call(sock: socket.socket, api_key: int, version: int, correlation_id: int, **values: object) -> object:
    sock.sendall(encode_request(correlation_id, "bench-scram", make(request_class(api_key, version), **values)))
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    got_id, body = decode_response(api_key, version, recv_exactly(sock, size))
    assert got_id == correlation_id
    return body


def handshake(address: tuple[str, int], mechanism: str) -> float:
    started = time.perf_counter()
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answer = _call(sock, SASL_HANDSHAKE, 1, 1, mechanism=mechanism)
        assert answer.error_code == 0, answer  # type: ignore[attr-defined]
        client = ScramClient([mechanism], USER, PASSWORD)
        first = _call(sock, SASL_AUTHENTICATE, 2, 2, auth_bytes=client.get_client_first().encode())
        client.set_server_first(first.auth_bytes.decode())  # type: ignore[attr-defined]
        final = _call(sock, SASL_AUTHENTICATE, 2, 3, auth_bytes=client.get_client_final().encode())
        assert final.error_code == 0, final  # type: ignore[attr-defined]
        client.set_server_final(final.auth_bytes.decode())  # type: ignore[attr-defined]
    return time.perf_counter() - started


def server_side(mechanism: str, handshakes: int) -> list[float]:
    """Seconds ScramServer spends on each handshake (its two steps), the client untimed."""
    from ottla.broker.security.sasl import ScramServer
    from ottla.broker.security.scram_credentials import ScramCredentials, credential_from_password

    store = ScramCredentials(tempfile.mkdtemp(prefix="bench-scram-"))
    store.change([(USER, mechanism, credential_from_password(mechanism, PASSWORD))], [])
    times = []
    for _ in range(handshakes):
        client = ScramClient([mechanism], USER, PASSWORD)
        first = client.get_client_first().encode()
        server = ScramServer(mechanism, store)
        started = time.perf_counter()
        server_first = server.step(first)
        spent = time.perf_counter() - started
        client.set_server_first(server_first.decode())
        final = client.get_client_final().encode()
        started = time.perf_counter()
        client.set_server_final(server.step(final).decode())
        times.append(spent + time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scram_handshake")
    parser.add_argument("--handshakes", type=int, default=200, help="per mechanism and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-process", action="store_true", help="the broker's side alone, no socket")
    args = parser.parse_args(argv)
    if args.in_process:
        print(f"| mechanism (broker side, {args.rounds} x {args.handshakes}) | median | p95 |\n|---|---:|---:|")
        for mechanism in MECHANISMS:
            values = sorted(t for _ in range(args.rounds) for t in server_side(mechanism, args.handshakes))
            print(f"| {mechanism} | {statistics.median(values) * 1e6:.0f} us | "
                  f"{values[int(len(values) * 0.95)] * 1e6:.0f} us |")
        return 0
    properties = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                  "sasl.enabled.mechanisms": ",".join(MECHANISMS)}
    scram = [arg for m in MECHANISMS for arg in ("--add-scram", f"{m}=[name={USER},password={PASSWORD}]")]
    broker = BrokerProcess(tempfile.mkdtemp(prefix="bench-scram-") + "/data", properties, args=scram).start()
    try:
        host, port = broker.listeners["SASL_PLAINTEXT"].rsplit(":", 1)
        address = (host, int(port))
        times: dict[str, list[float]] = {m: [] for m in MECHANISMS}
        for mechanism in MECHANISMS:  # warm-up
            handshake(address, mechanism)
        for _ in range(args.rounds):
            for mechanism in MECHANISMS:
                times[mechanism] += [handshake(address, mechanism) for _ in range(args.handshakes)]
        print(f"| mechanism ({args.rounds} x {args.handshakes} handshakes) | median | p95 |\n|---|---:|---:|")
        for mechanism, values in times.items():
            values.sort()
            print(f"| {mechanism} | {statistics.median(values) * 1000:.2f} ms | "
                  f"{values[int(len(values) * 0.95)] * 1000:.2f} ms |")
    finally:
        broker.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
