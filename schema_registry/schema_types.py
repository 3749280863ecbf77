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
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import avro.errors
import avro.name
import avro.schema
import jsonschema
import jsonschema.validators

from . import protobuf
from .avro_text import java_schema_text
from .errors import RegistryError, invalid_schema, schema_too_large
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
        _load_references(schema.references, resolve, names)
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
        referenced_schemas(schema.references, resolve)
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


# What one schema's references may bring in, counted over the whole graph they open (the
# references of references too), each referenced schema once however many paths lead to
# it. A schema past any bound is refused with Confluent's 42209 (schema too large). The
# largest Protobuf and Avro models in the wild import tens of files, not hundreds; the
# bounds keep one registration's walk, and its parse in the registry's worker thread,
# to a fraction of a second.
MAX_REFERENCED_SCHEMAS = 1_000  # distinct (subject, version) reached
MAX_REFERENCES_FOLLOWED = 10_000  # references read, repeats of a schema included
MAX_REFERENCED_BYTES = 16 * 1024 * 1024  # of the distinct referenced schemas' text


@dataclass(frozen=True, slots=True)
class ReferencedSchemas:
    """What a schema's references bring in: `schemas`, each referenced schema once, the
    ones it references before it; `followed`, every reference read (a schema reached by
    several references appears once per reference) with the schema it names."""

    schemas: tuple[SchemaText, ...]
    followed: tuple[tuple[Reference, SchemaText], ...]


def referenced_schemas(references: tuple[Reference, ...], resolve: Resolver) -> ReferencedSchemas:
    """Walk the references once, each (subject, version) resolved and expanded only the
    first time it is reached, so a diamond of shared references costs its edges, not its
    paths (three levels of 300 references to the one below were 300^3 paths). 42201 for
    a reference that does not exist or leads back to a schema being followed, 42209 past
    the bounds above. Iterative: a chain a thousand deep is no Python recursion."""
    order: list[SchemaText] = []
    followed: list[tuple[Reference, SchemaText]] = []
    reached: dict[tuple[str, int], SchemaText] = {}
    in_progress: set[tuple[str, int]] = set()
    size = 0
    stack: list[tuple[tuple[str, int] | None, Iterator[Reference]]] = [(None, iter(references))]
    while stack:
        owner, pending = stack[-1]
        reference = next(pending, None)
        if reference is None:
            stack.pop()
            if owner is not None:
                in_progress.discard(owner)
                order.append(reached[owner])
            continue
        if len(followed) >= MAX_REFERENCES_FOLLOWED:
            raise schema_too_large(f"its references lead to more than {MAX_REFERENCES_FOLLOWED:,} references")
        key = (reference.subject, reference.version)
        if key in in_progress:
            raise invalid_schema(f"reference cycle through subject {reference.subject!r} version "
                                 f"{reference.version}")
        target = reached.get(key)
        if target is None:
            target = resolve(reference)
            if target is None:
                raise invalid_schema(f"reference {reference.name!r} to subject {reference.subject!r} version "
                                     f"{reference.version}, which does not exist")
            size += len(target.text)
            if len(reached) >= MAX_REFERENCED_SCHEMAS:
                raise schema_too_large(f"its references lead to more than {MAX_REFERENCED_SCHEMAS:,} schemas")
            if size > MAX_REFERENCED_BYTES:
                raise schema_too_large(f"the schemas its references lead to hold more than "
                                       f"{MAX_REFERENCED_BYTES:,} characters")
            reached[key] = target
            in_progress.add(key)
            stack.append((key, iter(target.references)))
        followed.append((reference, target))
    return ReferencedSchemas(tuple(order), tuple(followed))


def protobuf_files(references: tuple[Reference, ...], resolve: Resolver) -> protobuf.ReferencedFiles:
    """(import path, .proto text) of every file a PROTOBUF schema's references bring, the
    references' own references included; 42201 for a missing one, one of another type,
    a name that is no import path, or a cycle."""
    files: dict[str, str] = {}
    for reference, target in referenced_schemas(references, resolve).followed:
        protobuf.check_reference_name(reference.name)
        if target.schema_type != PROTOBUF:
            raise invalid_schema(f"a PROTOBUF schema cannot reference a {target.schema_type} schema")
        if protobuf.is_well_known(reference.name):
            continue
        text = protobuf.as_text(target.text)
        if files.setdefault(reference.name, text) != text:
            raise invalid_schema(f"two references name different schemas {reference.name!r}")
    return list(files.items())


def _load_references(references: tuple[Reference, ...], resolve: Resolver, names: avro.name.Names) -> None:
    """Parse every referenced schema, once, its own references first, into `names`."""
    for target in referenced_schemas(references, resolve).schemas:
        if target.schema_type != AVRO:
            raise invalid_schema(f"an AVRO schema cannot reference a {target.schema_type} schema")
        try:
            avro.schema.make_avsc_object(json.loads(target.text), names)
        except avro.errors.SchemaParseException as exc:
            if "redefine" not in str(exc).lower():  # a type two references both define is no error
                raise


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."
