"""The walk of a schema's references (schema_registry/schema_types.py,
`referenced_schemas`): each referenced (subject, version) is resolved and expanded
once, however many paths lead to it, so a diamond of shared references costs its edges
and not its paths; past the bounds a schema is refused with Confluent's 42209, a cycle
or a missing schema with 42201; a chain deeper than Python's recursion limit is no
RecursionError.

Break-and-see-it-fail: with the walk expanding a schema again on every path (the
`reached` lookup skipped), test_a_diamond_is_walked_once failed for every type (8,420
resolutions where 3 were due) and the others still passed.
"""

from __future__ import annotations

import json

import pytest

from ottla.schema_registry import schema_types
from ottla.schema_registry.errors import RegistryError
from ottla.schema_registry.schema_types import (
    AVRO,
    JSON,
    PROTOBUF,
    Reference,
    SchemaText,
    parse,
    protobuf_files,
    referenced_schemas,
)

WIDTH = 20  # references of each level to the one below; three levels are 8,000 paths


class Counting:
    """A resolver over `schemas` ((subject, version) -> text) that counts its calls."""

    def __init__(self, schemas: dict[tuple[str, int], SchemaText]) -> None:
        self.schemas = schemas
        self.calls = 0

    def __call__(self, reference: Reference) -> SchemaText | None:
        self.calls += 1
        return self.schemas.get((reference.subject, reference.version))


def _refs(subject: str, name: str, width: int = WIDTH, suffix: str = "") -> tuple[Reference, ...]:
    return tuple(Reference(f"{name}{i}{suffix}", subject, 1) for i in range(width))


def _diamond(schema_type: str) -> tuple[dict[tuple[str, int], SchemaText], SchemaText]:
    """Three stored levels, each with WIDTH references to the one below, and a schema to
    register with WIDTH references to the top."""
    if schema_type == AVRO:
        texts = [json.dumps({"type": "record", "name": f"L{level}", "fields": (
            [{"name": "below", "type": f"L{level - 1}"}] if level else [{"name": "x", "type": "int"}])})
            for level in range(4)]
    elif schema_type == JSON:
        texts = [json.dumps({"type": "object", "title": f"L{level}"}) for level in range(4)]
    else:
        texts = [f'syntax = "proto3";\nmessage L{level} {{ int32 x = 1; }}\n' for level in range(4)]
    name, suffix = ("l{}_", "") if schema_type != PROTOBUF else ("l{}/f", ".proto")
    schemas: dict[tuple[str, int], SchemaText] = {}
    for level in range(3):
        refs = _refs(f"s{level - 1}", name.format(level), suffix=suffix) if level else ()
        schemas[(f"s{level}", 1)] = SchemaText(schema_type, texts[level], refs)
    return schemas, SchemaText(schema_type, texts[3], _refs("s2", name.format(3), suffix=suffix))


@pytest.mark.parametrize("schema_type", [AVRO, JSON, PROTOBUF])
def test_a_diamond_is_walked_once(schema_type: str) -> None:
    schemas, top = _diamond(schema_type)
    resolve = Counting(schemas)
    walked = referenced_schemas(top.references, resolve)
    assert resolve.calls == 3
    assert [s.text for s in walked.schemas] == [schemas[(f"s{i}", 1)].text for i in range(3)]
    assert len(walked.followed) == 3 * WIDTH  # every reference read once, none expanded twice
    resolve.calls = 0
    if schema_type == PROTOBUF:
        files = protobuf_files(top.references, resolve)
        assert len(files) == 3 * WIDTH and resolve.calls == 3
    else:
        parse(top, resolve)
        assert resolve.calls == 3


def test_bounds_are_refused_with_42209(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = {(f"c{i}", 1): SchemaText(JSON, "{}", (Reference("x", f"c{i + 1}", 1),) if i < 1_500 else ())
             for i in range(1_501)}
    with pytest.raises(RegistryError) as refused:
        referenced_schemas((Reference("x", "c0", 1),), Counting(chain))
    assert (refused.value.status, refused.value.error_code) == (422, 42209)
    assert "1,000 schemas" in refused.value.message

    wide = {("w", 1): SchemaText(JSON, "{}", _refs("leaf", "r", 10_000)), ("leaf", 1): SchemaText(JSON, "{}")}
    with pytest.raises(RegistryError) as refused:
        referenced_schemas(_refs("w", "top", 1), Counting(wide))
    assert refused.value.error_code == 42209 and "10,000 references" in refused.value.message

    monkeypatch.setattr(schema_types, "MAX_REFERENCED_BYTES", 1_000)
    big = {("a", 1): SchemaText(JSON, json.dumps({"description": "x" * 600})),
           ("b", 1): SchemaText(JSON, json.dumps({"description": "y" * 600}))}
    with pytest.raises(RegistryError) as refused:
        referenced_schemas((Reference("a", "a", 1), Reference("b", "b", 1)), Counting(big))
    assert refused.value.error_code == 42209 and "1,000 characters" in refused.value.message


def test_a_deep_chain_walks_without_recursion() -> None:
    depth = 999  # within the bound, past Python's recursion limit of 1,000 frames
    chain = {(f"c{i}", 1): SchemaText(JSON, "{}", (Reference("x", f"c{i + 1}", 1),) if i < depth - 1 else ())
             for i in range(depth)}
    walked = referenced_schemas((Reference("x", "c0", 1),), Counting(chain))
    assert len(walked.schemas) == depth and walked.schemas[0] == chain[(f"c{depth - 1}", 1)]


def test_cycles_and_missing_references_are_invalid() -> None:
    cycle = {("a", 1): SchemaText(JSON, "{}", (Reference("to-b", "b", 1),)),
             ("b", 1): SchemaText(JSON, "{}", (Reference("back-to-a", "a", 1),))}
    for references, reason in [((Reference("x", "a", 1),), "cycle"), ((Reference("x", "nope", 1),), "not exist")]:
        with pytest.raises(RegistryError) as refused:
            referenced_schemas(references, Counting(cycle))
        assert refused.value.error_code == 42201 and reason in refused.value.message
