"""Every relative link in the README and in docs/ reaches a file of the repository, and
every #anchor a heading of the page it names (as GitHub makes a heading's anchor), so
moving or renaming a page or a heading cannot leave a reader at a dead link.

Checked by breaking it: a link to docs/conformance.md#where-ottla-knowingly-differs-from-kafk
(one letter short) and one to docs/configuratio.md each made the test fail."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"),
                ROOT / "docker" / "README.md", ROOT / "pipeline" / "README.md"])

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
HTML_ID = re.compile(r"<a\s[^>]*(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose(text: str) -> str:
    """The text links can live in: without fenced blocks, indented code blocks (four
    spaces after a blank line, not inside a list item) and code spans."""
    kept: list[str] = []
    in_code, previous_blank = False, True
    for line in FENCE.sub("", text).split("\n"):
        blank, indented = not line.strip(), line.startswith(("    ", "\t"))
        if in_code:
            in_code = indented or blank
        else:
            in_code = indented and previous_blank and not kept_in_list(kept)
        if not in_code:
            kept.append(line)
        previous_blank = blank
    return CODE_SPAN.sub("", "\n".join(kept))


def kept_in_list(kept: list[str]) -> bool:
    """Whether the last non-blank line kept belongs to a list item, whose continuation
    lines are indented without being code."""
    for line in reversed(kept):
        if line.strip():
            return bool(re.match(r"^\s*([-*+]|\d+[.)])\s", line)) or line.startswith("  ")
    return False


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered (no code marks, a link's
    text), lower case, without punctuation, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    found: set[str] = set(HTML_ID.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def dead_links(page: Path) -> list[str]:
    dead = []
    for target in LINK.findall(prose(page.read_text())):
        if SCHEME.match(target) or target.startswith("//"):
            continue  # another site: not this repository's to keep
        path, _, anchor = target.partition("#")
        where = (page.parent / unquote(path)).resolve() if path else page
        shown = f"{page.relative_to(ROOT)}: ({target})"
        if not where.is_relative_to(ROOT) or not where.exists():
            dead.append(f"{shown}: no file {where}")
        elif anchor and (where.suffix != ".md" or anchor not in anchors(where)):
            dead.append(f"{shown}: no heading with the anchor #{anchor} in {where.relative_to(ROOT)}")
    return dead


def test_the_pages_checked_exist_and_hold_links() -> None:
    # The check means something only if it reads the pages and finds their links.
    assert all(page.exists() for page in PAGES)
    assert sum(len(LINK.findall(prose(page.read_text()))) for page in PAGES) > 20


def test_every_relative_link_resolves() -> None:
    dead = [d for page in PAGES for d in dead_links(page)]
    assert not dead, "\n".join(dead)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in LINK.findall(prose(readme))}
    unlinked = [p.relative_to(ROOT) for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_readme_names_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme


def test_slugs_are_githubs() -> None:
    assert slug("Where Ottla knowingly differs from Kafka") == "where-ottla-knowingly-differs-from-kafka"
    assert slug("Consumer groups (KIP-848)") == "consumer-groups-kip-848"
    assert slug("Looking at the files: dump-log") == "looking-at-the-files-dump-log"
    assert slug("Durability and the log's life") == "durability-and-the-logs-life"
    assert slug("`make run` and `make test`") == "make-run-and-make-test"
