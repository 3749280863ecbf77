"""`format("ottla")`: the Python data source that Spark instantiates on the driver for
every read and write, and which hands out the readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from ottla.pipeline.options import SinkOptions, SourceOptions
from ottla.pipeline.sink import Columns, OttlaBatchWriter, OttlaStreamWriter
from ottla.pipeline.source import SCHEMA, OttlaBatchReader, OttlaStreamReader


class OttlaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ottla"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> OttlaBatchReader:
        return OttlaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> OttlaStreamReader:
        return OttlaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> OttlaBatchWriter:
        if overwrite:
            raise ValueError("a topic can only be appended to: use mode('append')")
        options = SinkOptions.parse(self.options)
        return OttlaBatchWriter(options, Columns.of(schema, options.topic))

    def streamWriter(self, schema: StructType, overwrite: bool) -> OttlaStreamWriter:
        options = SinkOptions.parse(self.options)
        return OttlaStreamWriter(options, Columns.of(schema, options.topic))
