"""A broker imports a feature when it is configured (issue 45): `ottla serve` with
nothing configured was ready 1.2-1.3 s after exec, about 0.9 s of it imports of what it
did not serve (aiohttp for the admin endpoint, the web console, the schema registry's
schema types, PyJWT for signed OAUTHBEARER tokens, the other subcommands' client tools).
The broker here serves a producer and a consumer group, then stops cleanly; the list of
modules it loaded, written as it exits, holds none of them."""

from __future__ import annotations

import os

from tests.clients import consume_values, create_topic, idempotent_producer, produce_all

LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "launchers", "record_modules.py")

# Each with what imports it when it is wanted.
NOT_IMPORTED = {
    "aiohttp": "admin.port or schema.registry.listeners",
    "ottla.broker.http_site": "admin.port or schema.registry.listeners",
    "ottla.console": "admin.port",
    "ottla.schema_registry": "schema.registry.listeners, or the console's schema pages",
    "avro": "the schema registry's schema types",
    "jsonschema": "the schema registry's schema types",
    "google.protobuf": "the schema registry's schema types",
    "jwt": "a listener with sasl.oauthbearer.jwks.endpoint.url",
    "cryptography": "a listener with TLS (its keystore, client certificates)",
    "scramp": "the first SCRAM exchange",
    "trustme": "--dev-security",
    "ottla.broker.security.dev_security": "--dev-security",
    # ottla.tools.cli is the command itself, ottla.tools.serve what `ottla serve` runs.
    "ottla.tools.admin_cli": "the other subcommands (ottla topics, groups, transactions ...)",
    "ottla.tools.console": "ottla produce, ottla consume",
    "ottla.tools.open_console": "ottla console",
    "ottla.tools.client": "the other subcommands' wire client",
    "ottla.tools.dump_log": "ottla dump-log",
}


def test_a_broker_with_nothing_configured_imports_none_of_the_features(fresh_broker, tmp_path, topic_name):
    modules_file = tmp_path / "modules.txt"
    broker = fresh_broker(env={"OTTLA_TEST_MODULES_FILE": str(modules_file)}, launcher=LAUNCHER)
    create_topic(broker.bootstrap, topic_name)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"v")])
    assert consume_values(broker.bootstrap, topic_name, 1) == [b"v"]
    assert broker.stop() == 0
    imported = modules_file.read_text(encoding="utf-8").split()
    assert "ottla.broker.server" in imported  # the list is the broker's
    unwanted = [f"{name} (wanted only with {why})" for name in imported for prefix, why in NOT_IMPORTED.items()
                if name == prefix or name.startswith(prefix + ".")]
    assert not unwanted, "imported with nothing configured:\n" + "\n".join(unwanted)
