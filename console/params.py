"""A page's query parameters, each read within bounds: a request can ask for no more
than a page's worth of anything, whatever its URL says."""

from __future__ import annotations

from urllib.parse import parse_qs

MAX_TEXT = 1024  # a topic name is at most 249 characters; ids are short


class Params:
    def __init__(self, query: str) -> None:
        self._values = {key: values[0] for key, values in parse_qs(query[:8192], keep_blank_values=True).items()}

    def text(self, name: str, default: str = "") -> str:
        return self._values.get(name, default).strip()[:MAX_TEXT]

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        """The parameter as an integer within [low, high]; the default if absent or not a number."""
        raw = self._values.get(name, "").strip()
        try:
            value = int(raw) if raw else default
        except ValueError:
            value = default
        return min(max(value, low), high)

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        """One of `choices` (the first unless the parameter names another)."""
        value = self._values.get(name, "")
        return value if value in choices else choices[0]
