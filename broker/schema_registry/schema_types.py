"""What a schema is to the registry: its type, its canonical text (two registrations of
the same schema compare equal on it, so they get the same id) and its references.

JSON (JSON Schema) is checked against its metaschema by the `jsonschema` package
(the draft its `$schema` names, draft 7 if none); its canonical text is the document as
compact JSON, keys in the order written (sorted with `normalize`), non-ASCII as is: what
Confluent's JsonSchema.canonicalString() writes with Jackson.

AVRO is parsed by Apache Avro's own Python package (`avro`): a schema it refuses is an
invalid schema (42201), and the canonical text is what Avro's Java `Schema.toString()`
prints for it, as Confluent's registry returns it (avro_text.py; normalized, the parsed
schema written back with its keys sorted). Names a schema takes from its references are
resolved against the referenced schemas, which are parsed first into the same name
table, and written as names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Collection
from typing import Callable

import avro.errors
import avro.name
import avro.schema
import jsonschema
import jsonschema.validators

from . import protobuf
from .avro_text import java_schema_text
from .errors import RegistryError, invalid_schema
from .protobuf import PROTOBUF

AVRO = "AVRO"
JSON = "JSON"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaText:
    """A schema as stored: what a subject's version, or an id, stands for."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    canonical: SchemaText
    # AVRO: avro.schema.Schema; JSON: the document (a dict or a bool); PROTOBUF:
    # protobuf.ProtobufSchema
    parsed: object


# (subject, version) -> the stored schema it names, or None if there is none
Resolver = Callable[[Reference], SchemaText | None]


def parse_references(raw: object) -> tuple[Reference, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise invalid_schema("references must be a list")
    found = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("subject"), str) or type(item.get("version")) is not int:
            raise invalid_schema(f"a reference needs a name, a subject and an integer version: {item!r}")
        found.append(Reference(item["name"], item["subject"], item["version"]))
    return tuple(found)


def parse(schema: SchemaText, resolve: Resolver, normalize: bool = False) -> ParsedSchema:
    """Parse `schema`, its references resolved through `resolve`; raise 42201 if it is
    not a valid schema of its type (unknown type, a reference that is missing or leads
    back to itself, a schema too deeply nested to parse...)."""
    if schema.schema_type == JSON:
        return _parse_json(schema, resolve, normalize)
    if schema.schema_type == PROTOBUF:
        return _parse_protobuf(schema, resolve)
    if schema.schema_type != AVRO:
        raise invalid_schema(f"of unknown or unsupported schema type {schema.schema_type!r}")
    names = avro.name.Names()
    try:
        _load_references(schema.references, resolve, names, in_progress=set(), done=set())
        referenced = dict(names.names)
        document = json.loads(schema.text)
        parsed = avro.schema.make_avsc_object(document, names)
        if normalize:
            written = avro.name.Names()
            written.names = dict(referenced)
            text = json.dumps(parsed.to_json(written), separators=(",", ":"), sort_keys=True)
        else:
            text = java_schema_text(document)
    except RegistryError:
        raise
    except RecursionError:
        raise invalid_schema("nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise invalid_schema(f"{_short(schema.text)}, details: not JSON: {exc}") from None
    except Exception as exc:  # avro's parser raises more than SchemaParseException on odd JSON
        raise invalid_schema(f"{_short(schema.text)}, details: {exc}") from None
    return ParsedSchema(SchemaText(schema.schema_type, text, schema.references), parsed)


def _parse_json(schema: SchemaText, resolve: Resolver, normalize: bool) -> ParsedSchema:
    try:
        _check_references(schema, resolve, in_progress=set())
        document = json.loads(schema.text)
        if not isinstance(document, (dict, bool)):
            raise invalid_schema(f"{_short(schema.text)}, details: a JSON Schema is an object or a boolean")
        validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
        validator.check_schema(document)
        # As Confluent's JsonSchema writes it back with Jackson: compact, non-ASCII as is.
        text = json.dumps(document, separators=(",", ":"), sort_keys=normalize, ensure_ascii=False)
    except RegistryError:
        raise
    except RecursionError:
        raise invalid_schema("nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise invalid_schema(f"{_short(schema.text)}, details: not JSON: {exc}") from None
    except jsonschema.SchemaError as exc:
        raise invalid_schema(f"{_short(schema.text)}, details: {exc.message}") from None
    return ParsedSchema(SchemaText(schema.schema_type, text, schema.references), document)


def _parse_protobuf(schema: SchemaText, resolve: Resolver) -> ParsedSchema:
    try:
        files = protobuf_files(schema.references, resolve)
        compiled = protobuf.compile_schema(schema.text, files)
        text = protobuf.render(compiled.file)
    except RegistryError:
        raise
    except RecursionError:
        raise invalid_schema("nested too deeply to parse") from None
    return ParsedSchema(SchemaText(schema.schema_type, text, schema.references), compiled)


def _referenced(reference: Reference, resolve: Resolver, in_progress: Collection[Reference]) -> SchemaText:
    """The schema `reference` names; 42201 if it does not exist or leads back into
    `in_progress` (the references being followed)."""
    if reference in in_progress:
        raise invalid_schema(f"reference cycle through subject {reference.subject!r} version {reference.version}")
    target = resolve(reference)
    if target is None:
        raise invalid_schema(f"reference {reference.name!r} to subject {reference.subject!r} version "
                             f"{reference.version}, which does not exist")
    return target


def protobuf_files(references: tuple[Reference, ...], resolve: Resolver) -> protobuf.ReferencedFiles:
    """(import path, .proto text) of every file a PROTOBUF schema's references bring, the
    references' own references included; 42201 for a missing one, one of another type,
    a name that is no import path, or a cycle."""
    files: dict[str, str] = {}

    def add(found: tuple[Reference, ...], in_progress: frozenset[Reference]) -> None:
        for reference in found:
            protobuf.check_reference_name(reference.name)
            target = _referenced(reference, resolve, in_progress)
            if target.schema_type != PROTOBUF:
                raise invalid_schema(f"a PROTOBUF schema cannot reference a {target.schema_type} schema")
            add(target.references, in_progress | {reference})
            if protobuf.is_well_known(reference.name):
                continue
            text = protobuf.as_text(target.text)
            if files.setdefault(reference.name, text) != text:
                raise invalid_schema(f"two references name different schemas {reference.name!r}")

    add(references, frozenset())
    return list(files.items())


def _check_references(schema: SchemaText, resolve: Resolver, in_progress: set[Reference]) -> None:
    """Every reference of a JSON schema exists, and none leads back to itself."""
    for reference in schema.references:
        target = _referenced(reference, resolve, in_progress)
        _check_references(target, resolve, in_progress | {reference})


def _load_references(references: tuple[Reference, ...], resolve: Resolver, names: avro.name.Names,
                     in_progress: set[Reference], done: set[Reference]) -> None:
    """Parse every referenced schema (its own references first) into `names`."""
    for reference in references:
        if reference in done:
            continue
        target = _referenced(reference, resolve, in_progress)
        if target.schema_type != AVRO:
            raise invalid_schema(f"an AVRO schema cannot reference a {target.schema_type} schema")
        in_progress.add(reference)
        _load_references(target.references, resolve, names, in_progress, done)
        try:
            avro.schema.make_avsc_object(json.loads(target.text), names)
        except avro.errors.SchemaParseException as exc:
            if "redefine" not in str(exc).lower():  # a type two references both define is no error
                raise
        in_progress.discard(reference)
        done.add(reference)


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."
