"""The one place that reads kio's private schema introspection.

kio (pinned to one exact version in pyproject.toml) describes every message as a
dataclass whose field metadata names the Kafka type. The helpers that classify those
fields, and its per-field readers and writers, live in kio's private modules
(`kio.serial._introspect` and friends), which may change in any release. Everything
in Ottla that needs them imports them from here, so a kio upgrade is checked in one
file, and so is the one piece of knowledge of kio's package layout Ottla has
(`field_names_of_any_version`).
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
from dataclasses import fields
from functools import cache

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._parse import get_reader
from kio.serial._serialize import get_field_writer

__all__ = (
    "EntityField",
    "EntityTupleField",
    "PrimitiveField",
    "PrimitiveTupleField",
    "classify_field",
    "field_names_of_any_version",
    "get_field_tag",
    "get_field_writer",
    "get_reader",
    "get_schema_field_type",
    "get_tagged_field_default",
    "is_optional",
)


@cache
def field_names_of_any_version(cls: type) -> frozenset[str]:
    """The field names that the class of this name has in some version of its message.

    kio puts version N of a message in `kio.schema.<message>.v<N>.<request|response>`,
    its nested entities beside it under their Kafka names. The other versions' sources
    are read, not imported: importing a dozen versions of a message builds a hundred
    dataclasses, which would stall the first request that needs this."""
    names = {f.name for f in fields(cls)}
    prefix, _version, kind = cls.__module__.rsplit(".", 2)
    package = importlib.util.find_spec(prefix)
    if package is None or not package.submodule_search_locations:
        return frozenset(names)
    for location in package.submodule_search_locations:
        for version_dir in pathlib.Path(location).glob("v*"):
            source = version_dir / f"{kind}.py"
            if source.is_file():
                names.update(_fields_by_class(str(source)).get(cls.__name__, ()))
    return frozenset(names)


@cache
def _fields_by_class(path: str) -> dict[str, frozenset[str]]:
    """The annotated field names of each class in one kio schema source file."""
    return {node.name: frozenset(item.target.id for item in node.body
                                 if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                                 and not item.target.id.startswith("__"))
            for node in ast.parse(pathlib.Path(path).read_text()).body if isinstance(node, ast.ClassDef)}
