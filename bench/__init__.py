"""Throughput benchmark: Ottla against noida-db, driven by the confluent-kafka client.

    python -m bench [--rounds 3] [--messages 200000] [--size 100] [--no-write]

`bench.client` holds the workloads (each runs in its own client process), `bench.peers`
starts and stops the brokers, `bench.report` prints the table and writes RESULTS.md, and
`bench.__main__` runs the interleaved rounds.
"""
