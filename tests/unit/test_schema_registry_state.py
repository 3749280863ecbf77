"""The registry's state as `_schemas` records build it (broker/schema_registry/store.py):
ids found by schema and by number while some version holds them, gone when the last is
deleted for good, the highest id ever written kept; DELETE_SUBJECT marks versions
deleted; configs and modes come and go with their tombstones.

Break-and-see-it-fail: with `_release` doing nothing, test_an_id_lives_while_a_version_holds_it failed."""

from __future__ import annotations

from ottla.broker.schema_registry.schema_types import SchemaText
from ottla.broker.schema_registry.store import (RegistryState, SchemaVersion, config_key, delete_subject_key,
                                                mode_key, schema_key, schema_value)

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
