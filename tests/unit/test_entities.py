"""entities.make: one description of a response, built for whichever version was asked."""

from __future__ import annotations

import pytest

from ottla.protocol.codec import response_class
from ottla.protocol.entities import make
from ottla.protocol.errors import ErrorCode

FETCH, FIND_COORDINATOR = 1, 10


def test_a_field_the_version_lacks_is_dropped() -> None:
    # FindCoordinator v0 has no error_message; v1 has. The same call builds both.
    v0 = make(response_class(FIND_COORDINATOR, 0), error_code=ErrorCode.none, node_id=1, host="h", port=9,
              error_message="x", throttle_time=0)
    v1 = make(response_class(FIND_COORDINATOR, 1), error_code=ErrorCode.none, node_id=1, host="h", port=9,
              error_message="x", throttle_time=0)
    assert not hasattr(v0, "error_message") and v1.error_message == "x"


def test_a_name_no_version_has_is_refused() -> None:
    with pytest.raises(TypeError, match="no field eror_code"):
        make(response_class(FIND_COORDINATOR, 1), eror_code=ErrorCode.none)


def test_nested_entities_are_checked_too() -> None:
    # session_id exists in later versions only; partition_index in every version.
    make(response_class(FETCH, 4), responses=[{"topic": "t", "partitions": [{"partition_index": 0}]}], session_id=0)
    with pytest.raises(TypeError, match="no field partition"):
        make(response_class(FETCH, 12), responses=[{"topic": "t", "partitions": [{"partition": 0}]}])
