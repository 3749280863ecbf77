"""The registry's state as `_schemas` records build it (schema_registry/store.py):
ids found by schema and by number while some version holds them, gone when the last is
deleted for good, the highest id ever written kept; DELETE_SUBJECT marks versions
deleted; configs and modes come and go with their tombstones.

Break-and-see-it-fail: with `_release` doing nothing, test_an_id_lives_while_a_version_holds_it failed."""

from __future__ import annotations

import pytest

from ottla.schema_registry.schema_types import SchemaText
from ottla.schema_registry.store import (
    RegistryState,
    SchemaVersion,
    config_key,
    delete_subject_key,
    mode_key,
    schema_key,
    schema_value,
)

TEXT = SchemaText("AVRO", '"string"')


def _put(state: RegistryState, subject: str, version: int, schema_id: int, deleted: bool = False) -> None:
    state.apply(schema_key(subject, version), schema_value(SchemaVersion(subject, version, schema_id, TEXT, deleted)))


def test_an_id_lives_while_a_version_holds_it() -> None:
    state = RegistryState()
    _put(state, "a", 1, 1)
    _put(state, "b", 1, 1)
    assert state.id_of(TEXT) == 1 and state.schema_by_id(1) == TEXT
    _put(state, "a", 1, 1, deleted=True)  # soft-deleted: still held
    state.apply(schema_key("a", 1), None)
    assert state.schema_by_id(1) == TEXT
    state.apply(schema_key("b", 1), None)
    assert state.schema_by_id(1) is None and state.id_of(TEXT) is None
    assert state.max_id == 1 and state.versions == {}


def test_delete_subject_marks_its_versions_up_to_the_one_named() -> None:
    state = RegistryState()
    _put(state, "a", 1, 1)
    _put(state, "a", 2, 2)
    state.apply(delete_subject_key("a"), {"subject": "a", "version": 1})
    assert [state.versions["a"][v].deleted for v in (1, 2)] == [True, False]


def test_configs_and_modes_with_their_tombstones() -> None:
    state = RegistryState()
    state.apply(config_key(None), {"compatibilityLevel": "FULL"})
    state.apply(config_key("a"), {"compatibilityLevel": "NONE"})
    state.apply(mode_key("a"), {"mode": "READONLY"})
    assert state.configs == {None: {"compatibilityLevel": "FULL"}, "a": {"compatibilityLevel": "NONE"}}
    assert state.modes == {"a": "READONLY"}
    state.apply(config_key("a"), None)
    state.apply(mode_key("a"), None)
    assert state.configs == {None: {"compatibilityLevel": "FULL"}} and state.modes == {}


def test_unknown_keys_change_nothing() -> None:
    state = RegistryState()
    state.apply({"keytype": "NOOP", "magic": 0}, None)
    state.apply({"keytype": "SOMETHING_NEW", "subject": "a"}, {"x": 1})
    assert state == RegistryState()


def test_a_value_it_cannot_read_changes_nothing() -> None:
    """A record whose value is refused (an id past int32) leaves the version it names as
    it was, as Confluent's reader skips it; it is not a tombstone. Break-and-see-it-fail:
    with the value read after the previous version was dropped, "a" v1 was gone."""
    state = RegistryState()
    _put(state, "a", 1, 1)
    bad = {**schema_value(SchemaVersion("a", 1, 1, TEXT)), "id": 2**40}
    with pytest.raises(ValueError):
        state.apply(schema_key("a", 1), bad)
    assert state.versions["a"][1].schema_id == 1 and state.schema_by_id(1) == TEXT and state.max_id == 1
