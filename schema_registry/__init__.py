"""A schema registry built into the broker: Confluent Schema Registry's REST API (v1) on
its own listener (`schema.registry.listeners`), its state kept in the compacted topic
`_schemas` in Confluent's key/value format.

    errors.py         Confluent's error codes and messages
    schema_types.py   parsing and canonical text of a schema (AVRO through Apache Avro)
    protobuf.py       the PROTOBUF type: .proto text and descriptors, canonical text, its compatibility rules
    protoc.py         protoc (grpcio-tools) in a worker process of its own
    compatibility.py  the compatibility levels and the checks behind them
    store.py          the registry's state, as read from `_schemas`, and the records that change it
    registry.py       the operations of the API (register, look up, delete, config, mode)
    access.py         who may use it on a secured broker: the mapping of routes to the broker's ACLs
    rest.py           the HTTP routes, on aiohttp
"""
