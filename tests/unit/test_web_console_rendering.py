"""The console's rendering of what clients wrote: escaped, bounded, never failing on
hostile input (the browser tests in tests/integration/test_web_console.py drive the
pages themselves)."""

from __future__ import annotations

import json

from ottla.console.html import esc, tag
from ottla.console.pages.messages import MAX_PAGE_BYTES, SHOWN_BYTES, _payload, message_rows
from ottla.console.records import Row


def test_markup_is_escaped_in_text_and_attributes():
    assert tag("td", "<script>x</script>", data_x='"><img>') == \
        '<td data-x="&quot;&gt;&lt;img&gt;">&lt;script&gt;x&lt;/script&gt;</td>'
    assert esc("a&b'c") == "a&amp;b&#x27;c"


def test_values_are_json_text_or_hex_within_bounds():
    assert _payload(json.dumps({"a": [1, 2]}).encode(), "auto").startswith('<pre class="json">{\n  &quot;a&quot;')
    assert _payload(b"plain <b>text</b>", "auto") == '<span class="text">plain &lt;b&gt;text&lt;/b&gt;</span>'
    assert _payload(b"\xff\xfe", "auto") == '<code class="hex">ff fe</code>'
    assert _payload(b"abc", "hex") == '<code class="hex">61 62 63</code>'
    # A long UTF-8 value whose limit falls inside a character: still text, and summarised.
    long = "€".encode() * SHOWN_BYTES  # 3 bytes each: the limit falls inside one
    shown = _payload(long, "auto")
    assert shown.startswith('<span class="text">€€') and f"{len(long) - SHOWN_BYTES + 1:,} more bytes" in shown
    # Nested deeper than Python's parser goes, or whose indentation would blow up: as it came.
    deep = b"[" * 2000 + b"]" * 2000
    assert _payload(deep, "auto").startswith('<span class="text">[[[')
    wide = b"[" * 600 + b"1" + b"]" * 600
    assert _payload(wide, "json").startswith('<span class="text">[[[')


def test_one_page_of_rows_is_bounded_and_says_where_it_stopped():
    big = b"v" * 100_000
    rows = [Row(i, 0, 1, 0, i, False, key=big, value=big, headers=tuple((f"h{n}" * 100, big) for n in range(100)))
            for i in range(500)]
    html, cut_at = message_rows(rows, "auto")
    assert MAX_PAGE_BYTES < len(html) < MAX_PAGE_BYTES + 64 * 1024
    assert cut_at is not None and html.count("<tr ") == cut_at
    assert "… 80 more headers" in html
    small, cut = message_rows(rows[:3], "auto")
    assert cut is None and small.count("<tr ") == 3
