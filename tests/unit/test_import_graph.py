"""No import circle among Ottla's modules, imports under TYPE_CHECKING included; each
installed package imports only the packages it stands on (PACKAGES): protocol <- storage
<- coordinator <- broker, and beside broker/ the products that stand on it (the schema
registry, the admin endpoint and web console, the command-line tools, the test
fixtures), which broker/ never imports; and inside broker/, each room imports only the
rooms below it (ROOMS)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The installed packages (pyproject's package-dir, ottla.<name> from the folder <name>/)
# and those each may import besides itself. The broker's layers first; then what stands on
# the broker and is no part of it: the schema registry (its state in the `_schemas` topic),
# the console (it shows the registry's subjects and decodes records by their schemas),
# the tools (`ottla serve` puts the broker, the console and the registry together), the
# test fixtures (a broker subprocess, driven through the tools' wire client). The PySpark
# connector speaks to the broker over the wire only.
PACKAGES: dict[str, set[str]] = {
    "protocol": set(),
    "storage": {"protocol"},
    "coordinator": {"protocol", "storage"},
    "broker": {"protocol", "storage", "coordinator"},
    "schema_registry": {"protocol", "storage", "broker"},
    "console": {"protocol", "storage", "coordinator", "broker", "schema_registry"},
    "tools": {"protocol", "storage", "coordinator", "broker", "schema_registry", "console"},
    "testing": {"protocol", "tools"},
    "pipeline": set(),
}
LAYERS = tuple(PACKAGES)


def _modules() -> dict[str, Path]:
    modules = {}
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(["ottla", *parts])] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The Ottla modules `name` imports, wherever the import statement stands."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            # `from package import module` imports the module, not the package's
            # namespace (whose __init__ may well import its own modules).
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    assert len(graph) > 50  # the walk found the code
    assert _cycles(graph) == []


def test_packages_import_only_what_they_stand_on() -> None:
    crossing = sorted(
        (name, target) for name, targets in _graph().items() for target in targets
        if target.split(".")[1] != name.split(".")[1] and target.split(".")[1] not in PACKAGES[name.split(".")[1]]
    )
    assert crossing == []


def test_packages_have_no_circle() -> None:
    assert _cycles(PACKAGES) == []
    assert not any(product in PACKAGES["broker"] for product in ("schema_registry", "console", "tools", "testing"))


def test_every_installed_package_is_walked() -> None:
    """The folders pyproject.toml installs are the packages above."""
    text = (ROOT / "pyproject.toml").read_text()
    installed = text.split("[tool.setuptools.package-dir]")[1].split("\n[")[0]
    assert sorted(line.split("=")[1].strip().strip('"') for line in installed.splitlines() if "=" in line) \
        == sorted(PACKAGES)


def test_cycles_are_found() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_under_type_checking_counts(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n")
    (tmp_path / "b.py").write_text("def f() -> None:\n    from .a import f\n")
    modules = {"ottla.x.a": tmp_path / "a.py", "ottla.x.b": tmp_path / "b.py"}
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == [["ottla.x.a", "ottla.x.b"]]


# broker/'s rooms, and the rooms each may import besides its own (and the layers below
# broker/). The foundation is what every room may use (logging, JSON files, and the
# common ground of the HTTP servers beside the broker); the assembly (server.py) puts the
# rooms together; core is the rest of broker/'s own modules: the configuration, what
# handlers use, the metrics and faults the network layer counts and injects.
FOUNDATION = {"ottla.broker.logging", "ottla.broker.json_files", "ottla.broker.http_site"}
ASSEMBLY = {"ottla.broker.server"}
SUBPACKAGE_ROOMS = ("network", "security", "handlers")
ROOMS: dict[str, set[str]] = {
    "foundation": set(),
    "security": {"foundation"},
    "core": {"foundation", "security"},
    "handlers": {"foundation", "security", "core"},
    "network": {"foundation", "security", "core", "handlers"},
    "assembly": {"foundation", "security", "core", "handlers", "network"},
}


def _room(module: str) -> str:
    parts = module.split(".")
    if module in FOUNDATION:
        return "foundation"
    if module in ASSEMBLY:
        return "assembly"
    if len(parts) > 3 or (len(parts) == 3 and parts[2] in SUBPACKAGE_ROOMS):
        assert parts[2] in SUBPACKAGE_ROOMS, f"{module}: a new folder of broker/ needs its place in ROOMS"
        return parts[2]
    return "core"


def test_broker_rooms_import_only_the_rooms_below() -> None:
    crossing = sorted(
        (name, target) for name, targets in _graph().items() if name.startswith("ottla.broker")
        for target in targets if target.startswith("ottla.broker")
        and _room(target) != _room(name) and _room(target) not in ROOMS[_room(name)]
    )
    assert crossing == []


def test_broker_rooms_have_no_circle() -> None:
    assert {_room(name) for name in _graph() if name.startswith("ottla.broker")} == set(ROOMS)
    assert _cycles(ROOMS) == []


def test_schema_registry_stands_on_the_broker_s_logging_and_http_site_only() -> None:
    """schema_registry/ stands on the storage and protocol layers and the broker's
    logging and HTTP site only (not on the request handlers or the server), and only
    `ottla serve` (tools/serve.py, which starts it), the console's schema pages and its
    decoding of records by their schema id (the Messages page) reach into it."""
    room = "ottla.schema_registry"
    graph = _graph()
    allowed_outside = {"ottla.broker.logging", "ottla.broker.http_site"}
    leaks = sorted((name, target) for name, targets in graph.items() if name.startswith(room)
                   for target in targets
                   if target.startswith("ottla.broker") and not target.startswith(room)
                   and target not in allowed_outside)
    assert leaks == []
    users = sorted({name for name, targets in graph.items() if not name.startswith(room)
                    for target in targets if target.startswith(room)})
    assert users == ["ottla.console.pages.common", "ottla.console.pages.messages",
                     "ottla.console.pages.schemas", "ottla.console.schema_decoding",
                     "ottla.tools.serve"]
