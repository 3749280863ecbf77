"""The Ottla process: TCP server, connections, request routing, configuration, CLI."""
