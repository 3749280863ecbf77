"""Every logger of the product goes through ottla.protocol.loggers: listed among the
BROKER_LOGGER configs, with a level of its own that the broker's set-up applies."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("protocol", "storage", "coordinator", "broker", "pipeline")
REGISTRY = ROOT / "protocol" / "loggers.py"
# Being rewritten on another branch at the time of writing; it moves to get_logger
# when that branch merges. Remove the entry then: the test holds it to the rule.
NOT_YET: set[Path] = set()


def _bypasses(path: Path) -> list[int]:
    """Lines of `path` that make a logger other than through get_logger."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) in {("structlog", "get_logger"), ("logging", "getLogger")}):
            found.append(node.lineno)
    return found


def test_no_product_module_makes_its_own_logger():
    paths = sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if p != REGISTRY)
    bypassing = {str(p.relative_to(ROOT)): lines for p in paths if p not in NOT_YET and (lines := _bypasses(p))}
    assert bypassing == {}


def test_a_storage_logger_is_listed_and_obeys_its_level():
    """Broken by making storage/log.py's logger with structlog.get_logger("ottla.log"):
    the logger is unknown, so its level cannot be set."""
    script = (
        "from ottla.broker.logging import configure\n"
        "from ottla.protocol.loggers import logger_levels, set_logger_level\n"
        "from ottla.storage import log\n"
        "configure('info')\n"
        "assert 'ottla.log' in logger_levels(), logger_levels()\n"
        "set_logger_level('ottla.log', 'ERROR')\n"
        "log._log.warning('below the level')\n"
        "log._log.error('at the level')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "at the level" in result.stderr
    assert "below the level" not in result.stderr
