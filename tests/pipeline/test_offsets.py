"""The offset arithmetic of the source, without Spark or a broker."""

from __future__ import annotations

import pytest

from ottla.pipeline.offsets import DataLossError, continue_from, from_json, limit, parse_spec, resolve, to_json

EARLIEST = {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
LATEST = {("a", 0): 100, ("a", 1): 50, ("b", 0): 10}


def test_json_round_trip_uses_string_partitions():
    nested = to_json({("a", 1): 7, ("a", 0): 3, ("b", 0): 9})
    assert nested == {"a": {"0": 3, "1": 7}, "b": {"0": 9}}
    assert from_json(nested) == {("a", 0): 3, ("a", 1): 7, ("b", 0): 9}


def test_specs_resolve_against_the_bounds():
    assert resolve(parse_spec("earliest", "o"), "o", EARLIEST, LATEST) == EARLIEST
    assert resolve(parse_spec(" LATEST ", "o"), "o", EARLIEST, LATEST) == LATEST
    spec = parse_spec('{"a": {"0": 42, "1": -2}, "b": {"0": -1}}', "o")
    assert resolve(spec, "o", EARLIEST, LATEST) == {("a", 0): 42, ("a", 1): 5, ("b", 0): 10}


def test_json_spec_must_cover_exactly_the_partitions():
    with pytest.raises(ValueError, match="a-1, b-0"):
        resolve(parse_spec('{"a": {"0": 1}}', "startingOffsets"), "startingOffsets", EARLIEST, LATEST)
    with pytest.raises(ValueError, match="c-0"):
        resolve(parse_spec('{"a": {"0": 1, "1": 1}, "b": {"0": 1}, "c": {"0": 1}}', "o"), "o", EARLIEST, LATEST)
    with pytest.raises(ValueError, match="startingOffsets"):
        parse_spec("yesterday", "startingOffsets")


def test_limit_shares_in_proportion_and_never_exceeds():
    start = {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    end = limit(start, LATEST, 30)
    advanced = {tp: end[tp] - start[tp] for tp in start}
    assert sum(advanced.values()) == 30
    # 100, 45 and 10 waiting: 19.35, 8.71, 1.94 -> 19, 8, 1 and the 2 left over go to
    # the largest fractions (b-0 and a-1).
    assert advanced == {("a", 0): 19, ("a", 1): 9, ("b", 0): 2}
    assert limit(start, LATEST, 1000) == LATEST


@pytest.mark.parametrize("max_offsets", [1, 2, 3, 7, 50])
def test_limit_reaches_the_end_in_steps(max_offsets):
    position = dict(EARLIEST)
    steps = 0
    while position != LATEST:
        following = limit(position, LATEST, max_offsets)
        assert 0 < sum(following[tp] - position[tp] for tp in position) <= max_offsets
        assert all(position[tp] <= following[tp] <= LATEST[tp] for tp in position)
        position = following
        steps += 1
    waiting = sum(LATEST[tp] - EARLIEST[tp] for tp in LATEST)
    assert steps == -(-waiting // max_offsets)


def test_continue_from_adds_new_partitions_at_earliest():
    assert continue_from({("a", 0): 60}, EARLIEST, LATEST, fail_on_data_loss=True) == {
        ("a", 0): 60, ("a", 1): 5, ("b", 0): 0}


def test_continue_from_a_truncated_or_vanished_partition():
    checkpointed = {("a", 0): 60, ("a", 1): 70, ("b", 0): 3, ("gone", 0): 4}
    with pytest.raises(DataLossError, match="gone-0 no longer exists.*a-1 ends at 50"):
        continue_from(checkpointed, EARLIEST, LATEST, fail_on_data_loss=True)
    assert continue_from(checkpointed, EARLIEST, LATEST, fail_on_data_loss=False) == {
        ("a", 0): 60, ("a", 1): 5, ("b", 0): 3}
