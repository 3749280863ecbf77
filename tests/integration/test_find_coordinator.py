"""FindCoordinator's kept answers (broker/handlers/coordinators.py): an answer where all
is well is kept encoded per version, key type and key, and sent again to whoever asks the
same. Each key, type and version must still get its own answer, in its version's layout,
however the asks interleave; a key too long to keep, and a key type Kafka does not know,
are answered as before."""

from __future__ import annotations

from typing import Any

from ottla.broker.handlers.coordinators import KEPT_KEY_MAX
from tests.wire import WireClient, request

FIND_COORDINATOR = 10
GROUP, TRANSACTION = 0, 1
INVALID_REQUEST = 42


def _find(client: WireClient, version: int, key_type: int, key: str) -> tuple[int, str, int, int]:
    """(error code, key, node id, port) of one FindCoordinator."""
    if version >= 4:
        answer: Any = client.call(request(FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=[key]))
        (coordinator,) = answer.coordinators
        return coordinator.error_code, coordinator.key, coordinator.node_id, coordinator.port
    fields: dict[str, Any] = {"key": key} if version == 0 else {"key": key, "key_type": key_type}
    answer = client.call(request(FIND_COORDINATOR, version, **fields))
    return answer.error_code, key, answer.node_id, answer.port


def test_each_key_type_and_version_gets_its_own_answer_again_and_again(broker) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    long_key = "g" * (KEPT_KEY_MAX + 1)
    with WireClient(broker.bootstrap, timeout=60) as client:
        for _ in range(3):  # built and kept, then served from what is kept
            for version in (4, 0, 3, 1, 2):
                types = (GROUP, TRANSACTION) if version >= 1 else (GROUP,)
                for key_type in types:
                    for key in ("first", "second", long_key):
                        error, answered_key, node_id, answered_port = _find(client, version, key_type, key)
                        assert (error, answered_key, answered_port) == (0, key, port), (version, key_type, key)
                        assert node_id >= 0
        # A key type Kafka does not know: its error, never a kept answer.
        for _ in range(2):
            assert _find(client, 4, 7, "first")[0] == INVALID_REQUEST
