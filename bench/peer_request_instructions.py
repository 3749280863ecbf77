"""A native peer's instructions per request, for each request of bench.request_instructions'
round (issue 45: Fetch, Metadata, Heartbeat and the transaction calls at most 2x noida-db's).

request_instructions.py counts Ottla's by a dump at the start of every
`Connection.data_received`, from inside the broker. A native binary has no such hook, so
here the client asks for the dump from outside (`callgrind_control -d`, over vgdb) just
before it sends each request: each dump then holds what the broker executed since the
previous request was sent, that request's handling, what it does after answering (a
transaction's markers, flushes), and its threads' idle turns until the next request, the
same interval Ottla's figures cover. The figures are each request's median and least over
the measured rounds (a background timer falling into an interval now and then moves the
median, never the least).

noida-db closes the connection at ConsumerGroupHeartbeat (no KIP-848), so that request
is left out of its rounds.

    python -m bench.peer_request_instructions [--rounds 20] [--warmup 3] [--peer noida-db|ottla]
"""

from __future__ import annotations

import argparse
import statistics
from types import SimpleNamespace
from typing import Any

from bench import request_instructions

CONSUMER_GROUP_HEARTBEAT = 68


def measure(peer: str, rounds: int, warmup: int, say: Any = print) -> dict[str, tuple[float, int]]:
    """(median, least) instructions per request by name, over the measured rounds."""
    from tests.clients import create_topic
    from tests.wire import request

    names = {key: name for name, key in request_instructions.REQUESTS.items()}
    counts: dict[str, list[int]] = {name: [] for name in request_instructions.REQUESTS}
    call = request_instructions._call
    with request_instructions.broker_under_callgrind(peer) as (process, bootstrap, out_dir):
        measuring = False
        previous: int | None = None  # the api key of the request the next dump closes

        def dumped_call(client: Any, entity: Any) -> Any:
            nonlocal previous
            key = type(entity).__api_key__
            if key == CONSUMER_GROUP_HEARTBEAT and peer == "noida-db":
                return SimpleNamespace(error_code=0, member_id="", member_epoch=1)
            request_instructions._control(process.pid, "-d")
            if previous is not None and measuring:
                counts[names[previous]].append(request_instructions._newest_total(out_dir))
            previous = key
            return call(client, entity)

        request_instructions._call = dumped_call  # Rounds sends every request through it
        try:
            create_topic(bootstrap, request_instructions.TOPIC, 1)
            client = request_instructions.Rounds(bootstrap)
            client.join_classic_group()
            for i in range(warmup + rounds):
                measuring = i >= warmup
                client.round()
                say(f"round {i + 1}/{warmup + rounds} ({'measured' if measuring else 'warm-up'})")
            # Its dump closes the last measured round's last interval.
            dumped_call(client.client, request(18, 3, client_software_name="bench", client_software_version="1"))
            client.client.close()
        finally:
            request_instructions._call = call
    return {name: (statistics.median(values), min(values)) for name, values in counts.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_request_instructions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peer", choices=["noida-db", "ottla"], default="noida-db")
    args = parser.parse_args()
    counts = measure(args.peer, args.rounds, args.warmup, lambda line: print(line, flush=True))
    print(f"\n{args.peer}: instructions per request (callgrind Ir, dumped from outside as each request is sent) "
          f"over {args.rounds} rounds after {args.warmup} warm-up")
    print("| request | median | least |\n|---|---:|---:|")
    for name, (median, least) in counts.items():
        print(f"| {name} | {median:,.0f} | {least:,} |")


if __name__ == "__main__":
    main()
