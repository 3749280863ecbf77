"""`python -m bench`: Ottla failing one step ends that step only. The steps after it run,
what was measured is written with a note of the failure, and the exit code is 1 (a run of
37 minutes lost its figures to one failing step before this)."""

from __future__ import annotations

import json

import bench.__main__ as bench_main
from bench.coordinator_load import LoadResult


def test_a_failed_step_ends_only_itself_and_the_run_still_writes_its_figures(tmp_path, monkeypatch):
    results, runs = tmp_path / "RESULTS.md", tmp_path / "runs"
    monkeypatch.setattr(bench_main, "RESULTS_PATH", str(results))
    monkeypatch.setattr(bench_main, "RUNS_DIR", str(runs))

    def security_fails(*args, **kwargs):
        raise RuntimeError("the TLS handshake was refused")

    loaded = LoadResult(transactions=10, commits=20, records=30, history_bytes=2**20, ready_seconds=0.25,
                        produce_seconds=0.004, loaded_seconds=0.5, rss_bytes=64 * 2**20)
    monkeypatch.setattr(bench_main, "run_security", security_fails)
    monkeypatch.setattr(bench_main, "run_coordinator_load", lambda *args, **kwargs: loaded)

    code = bench_main.main(["--only", "security,coordinator-load", "--peers", ""])

    assert code == 1
    text = results.read_text()
    # The step after the failed one ran, and its figures were written...
    assert "Start-up after a long coordinator history" in text and "| ready (target < " in text
    # ...with a note of what failed.
    assert "Note: Ottla failed: security: RuntimeError: the TLS handshake was refused" in text
    (record,) = runs.iterdir()
    assert any(row["key"] == "coordinator-load ready"
               for row in json.loads(record.read_text())["targets"])
