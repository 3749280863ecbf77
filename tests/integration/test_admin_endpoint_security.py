"""The admin endpoint refuses changes from anyone not entitled to them (issue 12 point
11). Before, it listened on the first listener's interface (0.0.0.0 in the container),
asked for no credentials, and a cross-site text/plain POST from a web page set a fault
that closed every Kafka connection."""

from __future__ import annotations

import http.client
import json

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.host_addresses import own_non_loopback_address

PREFLIGHT_FREE_FAULT = json.dumps({"kind": "close", "api": "Metadata", "count": 100})


def _post(url: str, body: str, headers: dict[str, str]) -> int:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/faults", skip_host=True)
    for name, value in headers.items():
        connection.putheader(name, value)
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body.encode())
    status = connection.getresponse().status
    connection.close()
    return status


def _listening_addresses(port: int) -> set[str]:
    """The local addresses a TCP socket listens on at `port` (from /proc/net/tcp)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, port_hex = local.rsplit(":", 1)
                if state == "0A" and int(port_hex, 16) == port:
                    found.add(address)
    return found


def test_by_default_it_listens_on_loopback_and_refuses_cross_site_changes(fresh_broker):
    broker = fresh_broker(admin_port=0)
    admin = broker.admin
    port = int(admin.url.rsplit(":", 1)[1])
    assert admin.url.startswith("http://127.0.0.1:")
    assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1, and nothing else
    host = f"127.0.0.1:{port}"
    # The browser's cross-site "simple" request: text/plain, a foreign Origin.
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {"Host": host, "Origin": "http://evil.example",
                                                   "Content-Type": "text/plain"}) == 403
    # A DNS-rebinding page: same origin as far as the browser knows, but its Host is a name.
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}",
                                                   "Content-Type": "application/json"}) == 403
    # Not JSON, even from here.
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {"Host": host, "Content-Type": "text/plain"}) == 415
    assert admin.faults() == [], "a refused request set a fault"
    # The operator's own tools still work.
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {"Host": host, "Content-Type": "application/json"}) == 201
    admin.clear_faults()


def test_with_a_token_every_change_needs_it(fresh_broker):
    broker = fresh_broker(admin_port=0, admin_host="0.0.0.0", admin_token="s3cret")
    admin = broker.admin  # knows the token
    port = int(admin.url.rsplit(":", 1)[1])
    host = f"ottla.internal:{port}"  # from another container: a name is fine with a token
    json_type = {"Host": host, "Content-Type": "application/json"}
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, json_type) == 401
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {**json_type, "Authorization": "Bearer guess"}) == 401
    assert admin.faults() == []
    assert _post(admin.url, PREFLIGHT_FREE_FAULT, {**json_type, "Authorization": "Bearer s3cret"}) == 201
    admin.clear_faults()
    assert admin.healthy() and "ottla_requests_total" in admin.metrics()  # reading needs no token
    # DescribeConfigs never shows the secret, as Kafka hides its passwords.
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    entry = client.describe_configs([resource])[resource].result(10)["admin.token"]
    assert entry.is_sensitive and entry.value is None


def test_without_a_token_changes_from_other_machines_are_refused(fresh_broker):
    address = own_non_loopback_address()
    assert address is not None, "this test needs a non-loopback IPv4 address to connect from"
    broker = fresh_broker(admin_port=0, admin_host="0.0.0.0")  # as in the container image
    port = int(broker.admin.url.rsplit(":", 1)[1])
    # Another machine forging a loopback Host header is still another machine.
    assert _post(f"http://{address}:{port}", PREFLIGHT_FREE_FAULT,
                 {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}) == 403
    assert broker.admin.faults() == []
