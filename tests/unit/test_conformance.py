"""The table of APIs and versions in docs/conformance.md is the API table: every API Ottla
serves has its row with the versions ApiVersions advertises, and no other API has one.
(tests/integration: the running broker's ApiVersions answer is that same table.)"""

from __future__ import annotations

import re
from pathlib import Path

from ottla.protocol.apis import SUPPORTED

CONFORMANCE = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
MARKER = "<!-- conformance:"
ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\d+)(?:-(\d+))? \|", re.MULTILINE)


def conformance_table(text: str) -> str:
    """The table right under the marker, to its last row: the page goes on with other
    sections (and may hold other tables) that are not the API table."""
    lines = text[text.index(MARKER):].splitlines()[1:]
    table = []
    for line in lines:
        if not line.startswith("|"):
            break
        table.append(line)
    return "\n".join(table)


def test_the_conformance_table_is_the_api_table() -> None:
    table = conformance_table(CONFORMANCE.read_text())
    rows = {int(key): (name, int(low), int(high or low)) for name, key, low, high in ROW.findall(table)}
    served = {key: (api.name, api.advertised_min if api.advertised_min is not None else api.min_version,
                    api.max_version) for key, api in SUPPORTED.items()}
    # Produce advertises 0 (see apis.py) but the table says what is served: 3-12.
    served[0] = (SUPPORTED[0].name, SUPPORTED[0].min_version, SUPPORTED[0].max_version)
    assert rows == served
