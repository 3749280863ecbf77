"""The Ottla process, in rooms that import only downwards (tests/unit/test_import_graph.py):
server.py puts the broker together; network/ is the Kafka protocol front, handlers/ the
APIs, security/ TLS, SASL and ACLs; the modules here are the configuration, metrics,
faults and what handlers use. The products beside the broker are packages of their own:
the `ottla` command and its tools (tools/), the admin endpoint and web console
(console/), the schema registry (schema_registry/) and the test fixtures (testing/)."""
