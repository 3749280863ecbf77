"""Writes protocol/views/: the typed request and response views of every API Ottla
serves, read off kio's schema classes of the versions it serves (protocol/apis.py).

    python -m ottla.protocol.generate_views    # after a kio upgrade or a new version served

Per API, one module named as kio names the message's package (views/list_offsets.py):

- the request as a `typing.Protocol` (and one per nested struct), with every field that
  some served version carries. A field that only some versions carry is read like any
  other: where a version lacks it, it reads as its default, as in Kafka's generated
  message classes (codec.request_class installs those defaults on kio's classes once, from
  ABSENT in views/apis.py); its comment says which versions carry it;
- the response as a `TypedDict` with total=False (and one per nested struct): the values
  a handler answers with, version-agnostic, which protocol.entities builds into the
  entity of the client's version (a value its version lacks is dropped; one not given
  takes the schema's default).

and views/apis.py: each API as a `View[Request, Response]`, which the handler table
(broker/handlers/__init__.py) pairs with its handler so mypy checks that the handler takes
this request and answers this response, and the ABSENT defaults.

Typing only: nothing here wraps a request or a response in an object of its own.
tests/unit/test_views.py regenerates the views and fails if the checked-in files differ.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import sys
import uuid
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from . import apis
from .kio_schema import (
    EntityField,
    EntityTupleField,
    classify_field,
    is_optional,
)

VIEWS = pathlib.Path(__file__).parent / "views"

_REQUEST_TYPES = {
    "bool": "bool", "string": "str", "bytes": "bytes", "records": "bytes", "uuid": "uuid.UUID",
    "float64": "float", "error_code": "ErrorCode",
    "timedelta_i32": "datetime.timedelta", "timedelta_i64": "datetime.timedelta",
    "datetime_i64": "datetime.datetime",
}
# What a handler answers with: protocol.entities converts ints to kio's timedelta/datetime;
# records may be left in their file (Fetch's), which the encoder sends from there.
_RESPONSE_TYPES = {**_REQUEST_TYPES, "timedelta_i32": "int", "timedelta_i64": "int", "datetime_i64": "int",
                   "records": "bytes | RecordsInFile"}


_NO_DEFAULT = object()


@dataclass
class Field:
    name: str
    kafka_type: str
    versions: set[int] = field(default_factory=set)
    nullable: bool = False
    is_array: bool = False
    struct: Struct | None = None
    default: Any = _NO_DEFAULT


@dataclass
class Struct:
    name: str
    fields: dict[str, Field] = field(default_factory=dict)
    versions: set[int] = field(default_factory=set)  # the served versions that carry it


def _default(f: Any) -> Any:
    """The value Kafka reads a field as where a version lacks it: the schema's default,
    else its type's zero."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    kind = classify_field(f)
    if kind.is_array:
        return ()
    if is_optional(f):
        return None
    if isinstance(kind, EntityField):
        return _NO_DEFAULT  # a struct no version leaves out: never absent, in practice
    return {"bool": False, "string": "", "bytes": b"", "records": b"", "uuid": uuid.UUID(int=0),
            "error_code": ErrorCode.none, "float64": 0.0,
            "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
            "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
            }.get(f.metadata.get("kafka_type", ""), 0)


def _merge(struct: Struct, cls: type, version: int) -> None:
    struct.versions.add(version)
    for f in fields(cls):
        kind = classify_field(f)
        merged = struct.fields.get(f.name)
        if merged is None:
            merged = struct.fields[f.name] = Field(f.name, f.metadata.get("kafka_type", ""), default=_default(f))
            if isinstance(kind, (EntityField, EntityTupleField)):
                merged.struct = Struct(kind.type_.__name__)
        merged.versions.add(version)
        merged.nullable |= is_optional(f)
        merged.is_array |= kind.is_array
        if merged.struct is not None:
            assert isinstance(kind, (EntityField, EntityTupleField))
            _merge(merged.struct, kind.type_, version)


def _message(load: Any, api: apis.Api) -> tuple[Struct, list[int]]:
    served = list(range(api.min_version, api.max_version + 1))
    root: Struct | None = None
    for version in reversed(served):  # newest first: its names and its field order lead
        cls = load(api.key, version)
        if root is None:
            root = Struct(cls.__name__)
        _merge(root, cls, version)
    assert root is not None
    return root, served


def _versions(versions: set[int], served: list[int]) -> str:
    """'v2+', 'v0-3', 'v4' or 'v1, v3' for the served versions that carry a field."""
    ordered = sorted(versions)
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        if ordered[-1] == served[-1]:
            return f"v{ordered[0]}+"
        if ordered[0] == ordered[-1]:
            return f"v{ordered[0]}"
        return f"v{ordered[0]}-{ordered[-1]}"
    return ", ".join(f"v{v}" for v in ordered)


def _structs(root: Struct) -> list[Struct]:
    """Every struct of a message, nested ones before the structs that hold them."""
    found: list[Struct] = []

    def walk(struct: Struct) -> None:
        for f in struct.fields.values():
            if f.struct is not None:
                walk(f.struct)
        found.append(struct)

    walk(root)
    return found


def _name_structs(request: Struct, response: Struct) -> None:
    """Give every struct of the API a name of its own in the module: kio's (the newest
    served version's); a response struct whose name a request struct has takes the
    suffix Response, and one whose name a struct of a different shape on its own side
    has is prefixed with the name of the struct that holds it."""
    taken: dict[str, tuple[bool, Struct]] = {}

    def shape(struct: Struct) -> tuple[Any, ...]:
        return tuple((f.name, f.kafka_type, f.nullable, f.is_array, shape(f.struct) if f.struct else None)
                     for f in struct.fields.values())

    def visit(struct: Struct, parent: str, is_request: bool) -> None:
        other = taken.get(struct.name)
        if other is not None and other[0] != is_request:
            struct.name += "Response"
            other = taken.get(struct.name)
        if other is not None and shape(other[1]) != shape(struct):
            struct.name = parent + struct.name
        taken.setdefault(struct.name, (is_request, struct))
        for f in struct.fields.values():
            if f.struct is not None:
                visit(f.struct, struct.name, is_request)

    visit(request, "", True)
    visit(response, "", False)


def _type(f: Field, types: dict[str, str], array: str) -> str:
    item = f.struct.name if f.struct is not None else types.get(f.kafka_type, "int")
    text = array.format(item) if f.is_array else item
    return f"{text} | None" if f.nullable else text


def _render_struct(struct: Struct, served: list[int], request: bool, emitted: set[str]) -> list[str]:
    """A struct's class; a field that some versions carrying the struct lack says which
    versions carry it."""
    if struct.name in emitted:
        return []
    emitted.add(struct.name)
    if request:
        lines = [f"class {struct.name}(Protocol):"]
    else:
        lines = [f"class {struct.name}(TypedDict, total=False):"]
    for f in struct.fields.values():
        line = f"    {f.name}: " + (_type(f, _REQUEST_TYPES, "tuple[{}, ...]") if request
                                    else _type(f, _RESPONSE_TYPES, "Iterable[{}]"))
        if f.versions != struct.versions:
            line += f"  # {_versions(f.versions, served)}"
        lines.append(line)
    if not struct.fields:
        lines.append("    pass")
    return [*lines, "", ""]


def _literal(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, ErrorCode):
        return f"ErrorCode.{value.name}"
    if isinstance(value, datetime.timedelta):
        return f"datetime.timedelta(milliseconds={value // datetime.timedelta(milliseconds=1)})"
    if isinstance(value, uuid.UUID):
        return f"uuid.UUID(int={value.int})"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (bytes, float, tuple)):
        return repr(value)
    raise ValueError(f"no literal for the default {value!r}")


def _absent(root: Struct) -> dict[str, dict[str, str]]:
    """Per path of nested field names ("" for the request itself), the defaults of the
    fields some versions carrying their struct lack, as source text. A struct-valued
    field reads as None there (Kafka's default would be an instance of a class those
    versions do not have), and its view says it may be None."""
    found: dict[str, dict[str, str]] = {}

    def walk(struct: Struct, path: str) -> None:
        for f in struct.fields.values():
            if f.versions != struct.versions:
                if f.struct is not None and not f.is_array:
                    f.default = None  # a struct reads as None where its version lacks it
                    f.nullable = True
                if f.default is _NO_DEFAULT:
                    raise ValueError(f"{root.name}: {path}{f.name} is absent from a version and has no default")
                found.setdefault(path, {})[f.name] = _literal(f.default)
            if f.struct is not None:
                walk(f.struct, f"{path}{f.name}.")

    walk(root, "")
    return {path.rstrip("."): names for path, names in found.items()}


def _module(api: apis.Api) -> tuple[str, str, str, str, dict[str, dict[str, str]]]:
    """(module name, source, request view name, response view name, absent defaults)."""
    request, served = _message(load_request_schema, api)
    response, _ = _message(load_response_schema, api)
    _name_structs(request, response)
    absent = _absent(request)
    module = load_request_schema(api.key, api.max_version).__module__.split(".")[2]
    emitted: set[str] = set()
    body: list[str] = []
    for struct in _structs(request):
        body += _render_struct(struct, served, True, emitted)
    for struct in _structs(response):
        body += _render_struct(struct, served, False, emitted)
    text = "\n".join(body).rstrip() + "\n"
    stdlib = [line for name, line in (("datetime.", "import datetime"), ("uuid.", "import uuid"),
                                      ("Iterable[", "from collections.abc import Iterable"))
              if name in text]
    imports = "\n".join([*stdlib, "from typing import Protocol, TypedDict"])
    ottla = [line for name, line in (("ErrorCode", "from ottla.protocol.errors import ErrorCode"),
                                     ("RecordsInFile", "from ottla.protocol.views import RecordsInFile"))
             if name in text]
    if ottla:
        imports += "\n\n" + "\n".join(ottla)
    source = (f'"""{api.name} v{served[0]}-{served[-1]}, as Ottla serves it. Generated by '
              f'protocol/generate_views.py\nfrom kio\'s schema: do not edit."""\n\n'
              f"from __future__ import annotations\n\n{imports}\n\n\n{text}")
    return module, source, request.name, response.name, absent


def generate() -> dict[str, str]:
    """The views' files: name in protocol/views/ -> source."""
    files: dict[str, str] = {}
    table: list[str] = []
    absent: list[str] = []
    modules: list[str] = []
    for api in sorted(apis.SUPPORTED.values(), key=lambda api: api.key):
        module, source, request, response, defaults = _module(api)
        files[f"{module}.py"] = source
        modules.append(module)
        constant = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(api.name)).upper()
        line = f"{constant}: View[{module}.{request}, {module}.{response}] = View(apis.{constant})"
        if len(line) > 120:
            line = f"{constant}: View[\n    {module}.{request},\n    {module}.{response},\n] = View(apis.{constant})"
        table.append(line)
        if defaults:
            absent.append(f"    apis.{constant}.key: {{")
            for path, names in defaults.items():
                absent.append(f'        "{path}": {{')
                absent += [f'            "{name}": {value},' for name, value in names.items()]
                absent.append("        },")
            absent.append("    },")
    defaults_text = "\n".join(absent)
    stdlib = [line for name, line in (("datetime.", "import datetime"), ("uuid.", "import uuid"))
              if name in defaults_text]
    errors = "from ottla.protocol.errors import ErrorCode\n" if "ErrorCode." in defaults_text else ""
    source = (
        '"""Each API Ottla serves with its request and response views (protocol/views/<api>.py),\n'
        "and the defaults of the request fields some served versions lack. Generated by\n"
        'protocol/generate_views.py from kio\'s schema: do not edit."""\n\n'
        "from __future__ import annotations\n\n"
        + "".join(f"{line}\n" for line in stdlib)
        + "from typing import TYPE_CHECKING, Any\n\n"
        "from ottla.protocol import apis\n" + errors + "\n"
        "from . import View\n\n"
        "if TYPE_CHECKING:\n    from . import (\n"
        + "".join(f"        {module},\n" for module in sorted(modules)) + "    )\n\n"
        + "\n".join(table) + "\n\n"
        "# Per API key, per path of nested field names (\"\" for the request itself): the fields\n"
        "# some served version lacks, and the value they read as there.\n"
        "ABSENT: dict[int, dict[str, dict[str, Any]]] = {\n" + defaults_text + "\n}\n"
    )
    files["apis.py"] = source
    return files


def main() -> None:
    for name, source in generate().items():
        (VIEWS / name).write_text(source)
    print(f"wrote {VIEWS}", file=sys.stderr)


if __name__ == "__main__":
    main()
