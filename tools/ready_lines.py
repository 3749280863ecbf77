"""The lines `ottla serve` prints on stdout as it comes up, which the test launcher
(testing/), the container test and people's scripts wait for and read addresses from:
the CLI prints them with these functions, the readers match these prefixes."""

ADMIN_PREFIX = "Ottla admin endpoint: "
SCHEMA_REGISTRY_PREFIX = "Ottla schema registry: "
LISTENER_PREFIX = "Ottla listener "
READY_PREFIX = "Ottla is ready: bootstrap.servers="
# Printed once transactions and groups are served too (their coordinators load after
# the ready line, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile).
LOADED_LINE = "Ottla coordinators loaded"


def admin_line(url: str) -> str:
    return f"{ADMIN_PREFIX}{url}"


def schema_registry_line(url: str) -> str:
    return f"{SCHEMA_REGISTRY_PREFIX}{url}"


def listener_line(name: str, security_protocol: str, host: str, port: int) -> str:
    """Every listener after the first (the first is the ready line's bootstrap address)."""
    return f"{LISTENER_PREFIX}{name} ({security_protocol}): {host}:{port}"


def ready_line(bootstrap: str) -> str:
    return f"{READY_PREFIX}{bootstrap}"
