"""The console's HTML: one layout, escaped text, tables, links and pagination.

Everything a page shows that came from a client (topic names, keys, values, headers,
transactional and group ids, client ids) is attacker-controlled, so nothing reaches the
page as text except through `esc` (text and attribute values alike); the few pieces of
markup the pages build themselves are `Markup`, which `esc` passes through. Pages carry
no inline script or style, so the Content-Security-Policy the admin endpoint sends
(`default-src 'self'`) forbids any script a value might still smuggle in.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence
from urllib.parse import urlencode

PREFIX = "/console"
NAV = (("topics", "Topics"), ("messages", "Messages"), ("transactions", "Transactions"),
       ("producers", "Producers"), ("groups", "Consumer groups"), ("schemas", "Schemas"), ("broker", "Broker"))


class Markup(str):
    """HTML the console built itself: not escaped again."""


def esc(value: object) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object]) -> Markup:
    return Markup("".join(esc(part) for part in parts))


def tag(element: str, content: object = "", /, **attributes: object) -> Markup:
    """<name attr="...">content</name>; `class_` for class, None leaves an attribute out."""
    attrs = "".join(f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
                    for key, value in attributes.items() if value is not None)
    return Markup(f"<{element}{attrs}>{esc(content)}</{element}>")


def url(page: str, /, **params: object) -> str:
    query = urlencode({key: value for key, value in params.items() if value is not None and value != ""})
    return f"{PREFIX}/{page}" + (f"?{query}" if query else "")


def link(text: object, page: str, /, **params: object) -> Markup:
    return tag("a", text, href=url(page, **params))


def table(headers: Sequence[object], rows: Iterable[Sequence[object]], *, id_: str | None = None,
          empty: str = "nothing to show", row_classes: Iterable[str | None] | None = None) -> Markup:
    head = join(tag("th", h) for h in headers)
    classes = iter(row_classes) if row_classes is not None else None
    body = []
    for row in rows:
        css = next(classes) if classes is not None else None
        body.append(tag("tr", join(tag("td", cell) for cell in row), class_=css))
    if not body:
        body.append(tag("tr", tag("td", empty, colspan=len(headers), class_="empty")))
    return tag("table", join([tag("thead", tag("tr", head)), tag("tbody", join(body))]), id=id_)


def page(title: str, active: str, body: object, *, token_note: bool = False) -> bytes:
    nav = join(tag("a", label, href=url(key), class_="active" if key == active else None) for key, label in NAV)
    return (
        "<!doctype html>\n"
        + tag("html", join([
            tag("head", join([
                Markup('<meta charset="utf-8">'),
                Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                tag("title", f"{title} · Ottla console"),
                Markup(f'<link rel="stylesheet" href="{PREFIX}/static/console.css">'),
                Markup(f'<script src="{PREFIX}/static/console.js" defer></script>'),
            ])),
            tag("body", join([
                tag("header", join([tag("span", "Ottla", class_="brand"), tag("nav", nav),
                                    Markup('<label class="token">admin token '
                                           '<input type="password" id="admin-token" autocomplete="off" '
                                           'placeholder="if admin.token is set"></label>')])),
                tag("main", join([tag("h1", title), body])),
                tag("div", "", id="notice", role="status"),
            ])),
        ]), lang="en")
    ).encode()


def pager(page_name: str, total: int, page_no: int, size: int, /, **params: object) -> Markup:
    """"items a-b of n" with previous/next links, keeping the page's other parameters."""
    if total == 0:
        return Markup("")
    first = page_no * size
    last = min(first + size, total)
    parts: list[object] = [tag("span", f"{first + 1:,}–{last:,} of {total:,}")]
    if page_no > 0:
        parts.append(link("« previous", page_name, **params, page=page_no - 1))
    if last < total:
        parts.append(link("next »", page_name, **params, page=page_no + 1))
    return tag("div", join(parts), class_="pager")


def search_form(page_name: str, query: str, placeholder: str, /, **hidden: object) -> Markup:
    fields = [Markup(f'<input type="search" name="q" value="{esc(query)}" placeholder="{esc(placeholder)}">')]
    fields += [Markup(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">') for k, v in hidden.items()
               if v is not None]
    fields.append(Markup('<button type="submit">search</button>'))
    return tag("form", join(fields), method="get", action=url(page_name), class_="search")


def when(ms: int) -> Markup:
    """A Kafka timestamp (ms since the epoch) in UTC, or a dash for -1."""
    if ms is None or ms < 0:
        return Markup("–")
    return esc(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z")


def size_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def dl(pairs: Iterable[tuple[object, object]]) -> Markup:
    return tag("dl", join(join([tag("dt", k), tag("dd", v)]) for k, v in pairs))
