"""An AVRO schema's text as Confluent's registry returns it: what Apache Avro's Java
library prints for the parsed schema (`Schema.toString()`, compact JSON).

Written from the schema's JSON once Avro's Python parser has accepted it, in the order
the Java printer writes each kind's keys (tests/integration/test_schema_registry_text.py
compares the two on many schemas with org.apache.avro:avro itself):

- a record (or error): type, name, namespace, doc, fields, its other properties, aliases;
  a field: name, type, doc, default, order (unless ascending), aliases, its properties;
- an enum: type, name, namespace, doc, symbols, default, properties, aliases; a fixed:
  type, name, namespace, doc, size, properties, aliases;
- an array: type, items, properties; a map: type, values, properties; a primitive with
  properties (a logical type): type, then its properties; without, its bare name;
- properties in the order written; a key Avro reserves for another kind is dropped;
- a name's namespace only where it differs from the enclosing one (`""` where the
  enclosing one is left), a named type already written, and an alias, by its name
  relative to the namespace in force;
- numbers as Java prints a double (1.0E20), strings unescaped beyond JSON's need.
"""

from __future__ import annotations

import decimal
import json
import math
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# Avro's Java Schema: keys that are not a schema's properties (SCHEMA_RESERVED, ENUM_RESERVED
# adds "default") and not a field's (FIELD_RESERVED).
SCHEMA_RESERVED = frozenset({"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type",
                             "aliases"})
ENUM_RESERVED = SCHEMA_RESERVED | {"default"}
FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})


def java_schema_text(document: Any) -> str:
    """The text Avro's Java `Schema.toString()` prints for the schema `document` (parsed
    JSON of a schema Avro accepts)."""
    return _Printer().schema(document, None)


def _qualified(full: str, space: str | None) -> str:
    """Avro's Name.getQualified: the bare name within its own namespace, else the full name."""
    namespace, _, name = full.rpartition(".")
    return name if (namespace or None) in (None, space) else full


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


class _Printer:
    def __init__(self) -> None:
        self.known: set[str] = set()  # named types written so far: later ones are references

    def schema(self, node: Any, space: str | None) -> str:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return _json(node)
            return _json(_qualified(_full_name(node, space), space))
        if isinstance(node, list):
            return "[" + ",".join(self.schema(branch, space) for branch in node) + "]"
        kind = node["type"]
        if not isinstance(kind, str):
            return self.schema(kind, space)  # {"type": {...}}: the schema inside
        if kind in NAMED:
            return self._named(node, kind, space)
        if kind not in ("array", "map") and kind not in PRIMITIVES:
            return self.schema(kind, space)  # {"type": "Name"}: a reference
        members = [("type", _json(kind))]
        if kind == "array":
            members.append(("items", self.schema(node["items"], space)))
        elif kind == "map":
            members.append(("values", self.schema(node["values"], space)))
        members += _properties(node, SCHEMA_RESERVED)
        if kind in PRIMITIVES and len(members) == 1:
            return _json(kind)
        return _object(members)

    def _named(self, node: dict[str, Any], kind: str, space: str | None) -> str:
        name = node["name"]
        if "." in name:
            namespace: str | None = name.rpartition(".")[0]
            name = name.rpartition(".")[2]
        else:
            namespace = node.get("namespace")
            if namespace is None:  # absent or null: the enclosing one; "" is none
                namespace = space
        namespace = namespace or None
        full = _full_name(name, namespace)
        if full in self.known:
            return _json(_qualified(full, space))
        self.known.add(full)
        members = [("type", _json(kind)), ("name", _json(name))]
        if namespace is not None and namespace != space:
            members.append(("namespace", _json(namespace)))
        elif namespace is None and space is not None:
            members.append(("namespace", _json("")))
        if node.get("doc") is not None:
            members.append(("doc", _json(node["doc"])))
        if kind in ("record", "error"):
            members.append(("fields", "[" + ",".join(self._field(f, namespace) for f in node["fields"]) + "]"))
        elif kind == "enum":
            members.append(("symbols", _json(node["symbols"])))
            if node.get("default") is not None:
                members.append(("default", _json(node["default"])))
        else:
            members.append(("size", _json(node["size"])))
        members += _properties(node, ENUM_RESERVED if kind == "enum" else SCHEMA_RESERVED)
        if node.get("aliases"):
            members.append(("aliases", _json([_qualified(_full_name(alias, namespace), namespace)
                                              for alias in node["aliases"]])))
        return _object(members)

    def _field(self, field: dict[str, Any], space: str | None) -> str:
        members = [("name", _json(field["name"])), ("type", self.schema(field["type"], space))]
        if field.get("doc") is not None:
            members.append(("doc", _json(field["doc"])))
        if "default" in field:
            members.append(("default", _json(field["default"])))
        order = field.get("order", "ascending")
        if order != "ascending":
            members.append(("order", _json(order)))
        if field.get("aliases"):
            members.append(("aliases", _json(field["aliases"])))
        members += _properties(field, FIELD_RESERVED)
        return _object(members)


def _properties(node: dict[str, Any], reserved: frozenset[str]) -> list[tuple[str, str]]:
    return [(key, _json(value)) for key, value in node.items() if key not in reserved]


def _object(members: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{_json(key)}:{value}" for key, value in members) + "}"


def _json(value: Any) -> str:
    """A JSON value as Jackson writes it: compact, non-ASCII as is, doubles as Java's
    Double.toString."""
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, list):
        return "[" + ",".join(_json(item) for item in value) + "]"
    if isinstance(value, dict):
        return _object([(key, _json(item)) for key, item in value.items()])
    return json.dumps(value, ensure_ascii=False)


def _java_double(value: float) -> str:
    """Java's Double.toString: plain decimals from 10^-3 up to 10^7, else d.dddE±n; the
    shortest digits that read back as the same double, as Python's repr finds them."""
    if math.isnan(value) or math.isinf(value):
        return json.dumps(value)  # NaN, Infinity: not JSON (Python reads them; written back as read)
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    if 1e-3 <= abs(value) < 1e7:
        point = exponent + 1  # digits before the decimal point
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first) of repr(value), the shortest
    decimal that reads back as `value`."""
    exact = decimal.Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, exact.digits))
    assert isinstance(exact.exponent, int)
    return digits, exact.exponent + len(digits) - 1
