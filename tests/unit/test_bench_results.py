"""bench/RESULTS.md's writer: a new run goes first, the one it replaces moves under
"Earlier runs", and sections of their own (the soak's, the fuzzer's) stay in place."""

from __future__ import annotations

from bench.report import EARLIER_HEADING, RESULTS_INTRO, RESULTS_TITLE, RUN_HEADING, write_results


def test_a_new_run_goes_first_and_standing_sections_stay(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(f"{RESULTS_TITLE}\n\n{RESULTS_INTRO}\n\n## Soak: make soak\n\nsoak figures\n\n"
                    f"{RUN_HEADING}1\n\nfirst run\n\n{EARLIER_HEADING}\n\n### Run of 0\n\nzeroth run\n")
    write_results(str(path), f"{RUN_HEADING}2\n\nsecond run")
    text = path.read_text()
    order = [text.index(marker) for marker in ("## Soak: make soak", "soak figures", f"{RUN_HEADING}2",
                                               EARLIER_HEADING, "### Run of 1", "first run", "### Run of 0")]
    assert order == sorted(order)
    assert text.count("soak figures") == 1 and text.count(f"\n{RUN_HEADING}") == 1
