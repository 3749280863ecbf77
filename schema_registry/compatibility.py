"""Compatibility levels and the checks behind them.

BACKWARD: the new schema can read what the previous one wrote; FORWARD: the previous
one can read what the new one writes; FULL: both. The plain levels check against the
latest live version, the _TRANSITIVE ones against every live version; NONE checks
nothing. For AVRO, whether a reader can read a writer's data is Apache Avro's own
rule (`avro.compatibility.ReaderWriterCompatibilityChecker`), not Ottla's. For JSON
the rules are Ottla's own (no well-kept Python library has them), after the model
Confluent documents: a reader accepts a writer when every document valid under the
writer is valid under the reader, judged on `type`, `enum`, `properties`,
`additionalProperties` (open or closed content model), `required`, `items` and the
numeric, length and size bounds; any other keyword (`$ref`, `oneOf`, `pattern`...) must
be the same on both sides. For PROTOBUF the rules are Ottla's own too, after Confluent's
(protobuf.py says which). A schema of another type than the new one is incompatible.
"""

from __future__ import annotations

from typing import Any

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from .protobuf import differences as protobuf_differences

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, schema_type: str, new: Any, previous: list[tuple[int, str, str, Any]]) -> list[str]:
    """Why `new` (parsed, of `schema_type`) is not compatible at `level` with `previous`
    (version, text, type, parsed; oldest first, live versions only): an empty list when
    it is."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    directions = {"BACKWARD": ("new reads old",), "FORWARD": ("old reads new",),
                  "FULL": ("new reads old", "old reads new")}[level.removesuffix("_TRANSITIVE")]
    messages: list[str] = []
    for version, text, old_type, old in reversed(against):
        found = []
        for direction in directions:
            reader, writer = (new, old) if direction == "new reads old" else (old, new)
            names = ("new", "old") if direction == "new reads old" else ("old", "new")
            if old_type != schema_type:
                found.append(f"{{errorType:'TYPE_CHANGED', description:'The schema type changed from {old_type} "
                             f"to {schema_type}', additionalInfo:''}}")
                break
            if schema_type == "PROTOBUF":
                for kind, path, info in protobuf_differences(reader, writer):
                    found.append(f"{{errorType:'{kind}', description:'{info} at path '{path}' in the "
                                 f"{names[0]} schema', additionalInfo:''}}")
                continue
            if schema_type == "JSON":
                try:
                    differences = _json_reads(reader, writer, "#")
                except RecursionError:
                    differences = [("NESTED_TOO_DEEPLY", "#", "The schema is nested too deeply to compare")]
                for kind, path, info in differences:
                    found.append(f"{{errorType:'{kind}', description:'{info} at path '{path}' in the "
                                 f"{names[0]} schema', additionalInfo:''}}")
                continue
            result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
            if result.compatibility is SchemaCompatibilityType.compatible:
                continue
            info = "; ".join(sorted(result.messages))
            location = ", ".join(sorted(result.locations))
            for kind in sorted({kind.name.upper() for kind in result.incompatibilities}):
                description = _DESCRIPTIONS.get(kind, "{kind} at path '{location}'").format(
                    kind=kind, location=location, info=info, reader=names[0], writer=names[1])
                found.append(f"{{errorType:'{kind}', description:'{description}', additionalInfo:'{info}'}}")
        if found:
            messages += found
            messages.append(f"{{oldSchemaVersion: {version}}}")
            messages.append(f"{{oldSchema: '{text}'}}")
            messages.append(f"{{validateFields: 'false', compatibility: '{level}'}}")
    return messages


# Confluent's wording of Avro's incompatibility kinds (AvroCompatibilityChecker's messages).
_DESCRIPTIONS = {
    "NAME_MISMATCH": "The name of the schema has changed (path '{location}')",
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{location}' in the {reader} schema does not "
                           "match with the {writer} schema",
    "MISSING_ENUM_SYMBOLS": "The {reader} schema is missing enum symbols '{info}' at path '{location}' in the "
                            "{writer} schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{location}' in the {reader} schema has no "
                                          "default value and is missing in the {writer} schema",
    "TYPE_MISMATCH": "The type (path '{location}') of a field in the {reader} schema does not match with the "
                     "{writer} schema",
    "MISSING_UNION_BRANCH": "The {reader} schema is missing a type inside a union field at path '{location}' in "
                            "the {writer} schema",
}


_BOUNDS_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_BOUNDS_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_COMPARED = {"type", "enum", "properties", "additionalProperties", "required", "items", *_BOUNDS_UPPER,
             *_BOUNDS_LOWER, "title", "description", "default", "examples", "$schema", "$id", "$comment"}


def _types(schema: dict[str, Any]) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def _json_reads(reader: Any, writer: Any, path: str) -> list[tuple[str, str, str]]:
    """(kind, path, what) of each way a document valid under `writer` may be invalid under
    `reader` (JSON Schema); empty when the reader accepts everything the writer does."""
    if reader == writer or reader is True or reader == {} or writer is False:
        return []
    if reader is False:
        return [("FALSE_SCHEMA", path, "The schema accepts nothing")]
    if writer is True:
        writer = {}
    if not isinstance(reader, dict) or not isinstance(writer, dict):  # items as a list (tuple form)...
        return [("KEYWORD_CHANGED", path, "The schema differs")]
    found: list[tuple[str, str, str]] = []
    for keyword in sorted((set(reader) | set(writer)) - _COMPARED):
        if reader.get(keyword) != writer.get(keyword):
            found.append(("KEYWORD_CHANGED", path, f"The keyword {keyword} differs"))
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        widened = reader_types | ({"integer"} if "number" in reader_types else set())
        if writer_types is None or not writer_types <= widened:
            found.append(("TYPE_NARROWED", path, f"The type {sorted(writer_types or ['any'])} is not in "
                                                 f"{sorted(reader_types)}"))
    if "enum" in reader:
        if "enum" not in writer or any(value not in reader["enum"] for value in writer["enum"]):
            found.append(("ENUM_ARRAY_NARROWED", path, "An enum value is missing"))
    for keyword in _BOUNDS_UPPER:
        if keyword in reader and (keyword not in writer or writer[keyword] > reader[keyword]):
            found.append((keyword.upper() + "_DECREASED", path, f"The bound {keyword} is tighter"))
    for keyword in _BOUNDS_LOWER:
        if keyword in reader and (keyword not in writer or writer[keyword] < reader[keyword]):
            found.append((keyword.upper() + "_INCREASED", path, f"The bound {keyword} is tighter"))
    missing_required = set(reader.get("required", ())) - set(writer.get("required", ()))
    for name in sorted(missing_required):
        found.append(("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", f"{path}/properties/{name}",
                      f"The property {name} is required"))
    reader_properties = reader.get("properties", {})
    writer_properties = writer.get("properties", {})
    reader_extra = reader.get("additionalProperties", True)
    writer_extra = writer.get("additionalProperties", True)
    for name in sorted(set(reader_properties) | set(writer_properties)):
        at = f"{path}/properties/{name}"
        if name in reader_properties and name in writer_properties:
            found += _json_reads(reader_properties[name], writer_properties[name], at)
        elif name in writer_properties:  # the reader takes it as an additional property
            if reader_extra is False:
                found.append(("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", at, f"The property {name} is refused"))
            else:
                found += _json_reads(reader_extra, writer_properties[name], at)
        else:  # the writer may put anything its additionalProperties allows under this name
            found += _json_reads(reader_properties[name], writer_extra, at)
    if "additionalProperties" in reader:
        found += _json_reads(reader_extra, writer_extra, f"{path}/additionalProperties")
    if "items" in reader:
        found += _json_reads(reader["items"], writer.get("items", True), f"{path}/items")
    return found
