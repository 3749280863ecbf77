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

import importlib
import pkgutil
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
    its nested entities beside it under their Kafka names."""
    names = {f.name for f in fields(cls)}
    prefix, _version, kind = cls.__module__.rsplit(".", 2)
    try:
        package = importlib.import_module(prefix)
    except ImportError:
        return frozenset(names)
    for module_info in pkgutil.iter_modules(package.__path__):
        if not module_info.name.startswith("v"):
            continue
        try:
            module = importlib.import_module(f"{prefix}.{module_info.name}.{kind}")
        except ImportError:
            continue
        other = getattr(module, cls.__name__, None)
        if other is not None:
            names.update(f.name for f in fields(other))
    return frozenset(names)
