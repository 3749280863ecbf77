"""The one thing pyproject.toml cannot say without an experimental table: the optional C
extensions. protocol/_records.c checks a produced batch (header, CRC, records); protocol/_codec.c
decodes request headers, checks request bodies and encodes responses;
broker/network/_pipeline.c serves a request inline (header, handler, metrics, encoding)
in one call; protocol/_coordinator_batch.c encodes a coordinator's batch of its own records;
coordinator/_transaction_value.c encodes the value of a __transaction_state record (both
with protocol/_encode.h's integers and varints);
storage/_batch_write.c writes a batch to its segment and
storage/_producer_state.c records it in the producer state; storage/_common_append.c makes
the common append (check, write, record) in one call. Where they cannot
be built (no C compiler) the install goes on without them and protocol/records.py and
protocol/codec.py fall back to Python. Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("ottla.protocol._records", sources=["protocol/_records.c"], optional=True),
    Extension("ottla.protocol._codec", sources=["protocol/_codec.c"], libraries=["m"], optional=True),
    Extension("ottla.broker.network._pipeline", sources=["broker/network/_pipeline.c"], optional=True),
    Extension("ottla.protocol._coordinator_batch", sources=["protocol/_coordinator_batch.c"],
              depends=["protocol/_encode.h"], optional=True),
    Extension("ottla.coordinator._transaction_value", sources=["coordinator/_transaction_value.c"],
              depends=["protocol/_encode.h"], optional=True),
    Extension("ottla.storage._batch_write", sources=["storage/_batch_write.c"], optional=True),
    Extension("ottla.storage._producer_state", sources=["storage/_producer_state.c"], optional=True),
    Extension("ottla.storage._common_append", sources=["storage/_common_append.c"], optional=True),
])
