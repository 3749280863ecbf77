"""The Ottla process, in rooms that import only downwards (tests/unit/test_import_graph.py):
server.py and cli.py put the broker and the `ottla` command together; network/ is the
Kafka protocol front, handlers/ the APIs, admin/ the admin endpoint, metrics, faults and
web console, tools/ the commands beside the broker, testing/ the test launcher and pytest
plugin, security/ TLS, SASL and ACLs; the modules here are the configuration and what
handlers use."""
