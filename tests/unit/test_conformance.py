"""The README's table of APIs and versions is the API table: every API Ottla serves has
its row with the versions ApiVersions advertises, and no other API has one.
(tests/integration: the running broker's ApiVersions answer is that same table.)"""

from __future__ import annotations

import re
from pathlib import Path

from ottla.protocol.apis import SUPPORTED

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\d+)(?:-(\d+))? \|", re.M)


def test_the_readme_table_is_the_api_table():
    text = README.read_text()
    table = text[text.index("<!-- conformance:"):]
    rows = {int(key): (name, int(low), int(high or low)) for name, key, low, high in ROW.findall(table)}
    served = {key: (api.name, api.advertised_min if api.advertised_min is not None else api.min_version,
                    api.max_version) for key, api in SUPPORTED.items()}
    # Produce advertises 0 (see apis.py) but the table says what is served: 3-11.
    served[0] = (SUPPORTED[0].name, SUPPORTED[0].min_version, SUPPORTED[0].max_version)
    assert rows == served
