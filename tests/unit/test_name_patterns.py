"""Names are matched whole (issue 40, point 7): `$` also matches before a final newline,
so a pattern checked with it took "nl\\n" for a legal topic, whose directory
("nl\\n-0") no restart read back: the topic and its records were gone. Kafka checks
every character (Topic.validate); CreateTopics of "nl\\n" is refused with
INVALID_TOPIC_EXCEPTION by both (tests/conformance, create-topics/newline-name)."""

from __future__ import annotations

import pytest

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import validate_topic_name


@pytest.mark.parametrize("name", ["nl\n", "a\nb", "\n", "ok.name\n", "x\r\n"])
def test_a_topic_name_with_a_newline_is_refused(name):
    with pytest.raises(KafkaError) as refused:
        validate_topic_name(name)
    assert refused.value.code == ErrorCode.invalid_topic_exception


def test_legal_names_still_pass():
    for name in ("nl", "a.b_c-D9", "x" * 249):
        validate_topic_name(name)
