"""Secrets outside the wire (issue 28, points 11 and 14): command-line errors that do
not repeat a password, and the files that hold ACLs, credentials and records closed to
other users whatever the umask."""

from __future__ import annotations

import subprocess
import sys

import pytest

SECRET = "s3cret-Pw0rd"


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla.broker.cli", "serve", "--data-dir", str(tmp_path / "data"),
                           "--port", "0", *args], capture_output=True, text=True, timeout=60)


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
