"""Benchmark: Ottla against Apache Kafka 4.3.1, noida-db, tansu and librdkafka's mock
cluster, driven by the confluent-kafka client, and Ottla's own scale run.

    python -m bench [--rounds 5] [--messages 200000] [--size 100] [--timeout 120]
                    [--only NAME,NAME] [--peers kafka,noida-db,ottla-2,tansu,mock] [--scale-gib 5]
                    [--instruction-rounds 20] [--baseline REV] [--no-pin] [--no-write]

- `bench.__main__` runs the interleaved rounds, then the scale run.
- `bench.peers` starts and stops the brokers.
- `bench.client` is the table of workloads and the client process that runs one;
  `bench.workloads` the single-client ones (idempotent and transactional produce,
  consume, read_committed consume), `bench.parallel` the parallel producers,
  `bench.latency` the fixed-rate latency measurement.
- `bench.scale`: start-up times and memory with 1,000 partitions and gigabytes of data.
- `bench.ci_loop`, `bench.round_trips`, `bench.request_instructions`, `bench.starts`,
  `bench.coordinator_load`, `bench.many_partitions`, `bench.many_clients`,
  `bench.security`: the runs of their own after the rounds.
- `bench.report` prints the tables and writes RESULTS.md; `bench.targets` and
  `bench.kafka_targets` judge the targets, by the rules of `bench.verdicts`;
  `bench.compare` sets two runs' targets side by side.
"""
