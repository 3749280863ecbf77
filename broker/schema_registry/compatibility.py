"""Compatibility levels and the checks behind them.

BACKWARD: the new schema can read what the previous one wrote; FORWARD: the previous
one can read what the new one writes; FULL: both. The plain levels check against the
latest live version, the _TRANSITIVE ones against every live version; NONE checks
nothing. Whether a reader can read a writer's data is Apache Avro's own rule
(`avro.compatibility.ReaderWriterCompatibilityChecker`), not Ottla's.
"""

from __future__ import annotations

from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from avro.schema import Schema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, new: Schema, previous: list[tuple[int, str, Schema]]) -> list[str]:
    """Why `new` is not compatible at `level` with `previous` (version, text, schema;
    oldest first, live versions only): an empty list when it is."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    directions = {"BACKWARD": ("new reads old",), "FORWARD": ("old reads new",),
                  "FULL": ("new reads old", "old reads new")}[level.removesuffix("_TRANSITIVE")]
    messages: list[str] = []
    for version, text, old in reversed(against):
        found = []
        for direction in directions:
            reader, writer = (new, old) if direction == "new reads old" else (old, new)
            result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
            if result.compatibility is SchemaCompatibilityType.compatible:
                continue
            names = ("new", "old") if direction == "new reads old" else ("old", "new")
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
