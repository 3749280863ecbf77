"""Secrets outside the wire (issue 28, points 11 and 14): command-line errors that do
not repeat a password, and the files that hold ACLs, credentials and records closed to
other users whatever the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

SECRET = "s3cret-Pw0rd"


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla.tools.cli", "serve", "--data-dir", str(tmp_path / "data"),
                           "--port", "0", *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("credential", [
    f"SCRAM-SHA-256=[name=alice password={SECRET}]",
    f"SCRAM-SHA-256=[name=alice,{SECRET}]",
    f"SCRAM-SHA-256=[name=alice,password={SECRET}",
    f"SCRAM-SHA-999=[name=alice,password={SECRET}]",
    f"SCRAM-SHA-256=[password={SECRET}]",
])
def test_a_malformed_add_scram_does_not_echo_the_password(tmp_path, credential):
    """Point 11. Broken by putting {text!r} back into parse_add_scram's first message:
    the password was on stderr."""
    refused = _serve(tmp_path, "--add-scram", credential)
    assert refused.returncode == 2 and "--add-scram" in refused.stderr, refused.stderr
    assert SECRET[:6] not in refused.stderr + refused.stdout


def test_a_jaas_config_that_cannot_be_read_is_not_echoed(tmp_path):
    """Point 11. Broken by putting the text at the failing position back into
    plain_users_of's message: the password was on stderr."""
    config = tmp_path / "server.properties"
    config.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n"
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                      "org.apache.kafka.common.security.plain.PlainLoginModule required "
                      f'user_alice="alice" @user_bob="{SECRET}";\n')
    refused = _serve(tmp_path, "--config", str(config))
    assert refused.returncode != 0 and "jaas.config" in refused.stderr and "user_alice" in refused.stderr, \
        refused.stderr
    assert SECRET[:6] not in refused.stderr + refused.stdout


def test_acl_and_credential_files_and_the_data_dir_are_the_owners_alone_whatever_the_umask(tmp_path):
    """Point 14. Under umask 000, in a data directory made world-writable beforehand, the
    broker makes the directory 0700 and writes its ACL and SCRAM files 0600. Broken by
    writing acls.json with write_json's default mode: it was 0644."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    from ottla.testing import BrokerProcess

    data = tmp_path / "data"
    data.mkdir(mode=0o777)
    os.chmod(data, 0o777)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
    previous = os.umask(0)
    try:
        broker = BrokerProcess(str(data), {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin"}).start()
    finally:
        os.umask(previous)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
        for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL,
                                                    "User:bob", "*", AclOperation.READ,
                                                    AclPermissionType.ALLOW)]).values():
            future.result(10)
        upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"bob-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(10)
        modes = {name: stat.S_IMODE(os.stat(data / name).st_mode) for name in os.listdir(data)
                 if name.endswith(".json") and ("acl" in name or "scram" in name)}
        assert len(modes) == 2 and set(modes.values()) == {0o600}, modes
        assert stat.S_IMODE(os.stat(data).st_mode) == 0o700
    finally:
        broker.cleanup()
