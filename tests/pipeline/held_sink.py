"""`format("ottla-held-at-commit")`: the exactly-once sink, held at the driver's commit
of one batch, for the test that kills the driver there (tests/pipeline/test_sink.py).

Spark commits a streaming batch in three steps: the tasks write (the sink's
transactions commit), the driver calls the writer's `commit(batch id)`, then Spark
records the batch in the checkpoint. With the options `holdBatch` (a batch id) and
`holdSignal` (a path), this sink's writer, once that batch's commit has run, creates
the path and waits forever, so the test can SIGKILL the driver right there. The
shipped sink has no such hook: this subclass is the test's own.

Spark runs the writer's `commit` in a Python worker of its own, which cannot import
this project's tests: `register` pickles this module by value, so the workers get the
classes themselves."""

from __future__ import annotations

import time

from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from ottla.pipeline.datasource import OttlaDataSource
from ottla.pipeline.options import SinkOptions
from ottla.pipeline.sink import Columns, OttlaStreamWriter

NAME = "ottla-held-at-commit"
HOLD_OPTIONS = ("holdBatch", "holdSignal")


class HeldStreamWriter(OttlaStreamWriter):
    def __init__(self, options: SinkOptions, columns: Columns, hold_batch: int, signal_path: str) -> None:
        super().__init__(options, columns)
        self.hold_batch = hold_batch
        self.signal_path = signal_path

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        super().commit(messages, batchId)
        if batchId == self.hold_batch:
            with open(self.signal_path, "w") as signal_file:
                signal_file.write(f"batch {batchId} committed by {len(messages)} tasks\n")
            while True:
                time.sleep(60)


class HeldAtCommitDataSource(OttlaDataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def streamWriter(self, schema: StructType, overwrite: bool) -> OttlaStreamWriter:
        sink_options = {k: v for k, v in self.options.items() if k not in HOLD_OPTIONS}
        options = SinkOptions.parse(sink_options)
        return HeldStreamWriter(options, Columns.of(schema, options.topic), int(self.options["holdBatch"]),
                                self.options["holdSignal"])


def register(spark: SparkSession) -> None:
    """Make `format("ottla-held-at-commit")` known to this Spark session."""
    import tests.pipeline.held_sink as this_module

    cloudpickle.register_pickle_by_value(this_module)
    spark.dataSource.register(HeldAtCommitDataSource)
