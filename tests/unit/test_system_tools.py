"""A program the tests need that is missing is handled one way everywhere
(tests/system_tools.py): the test fails naming the Debian package, never skips; and the
Makefile's install step stops naming the package when it cannot install."""

from __future__ import annotations

import pathlib
import re

import pytest

from tests import system_tools

TESTS = pathlib.Path(__file__).resolve().parents[1]


def test_a_missing_program_fails_the_test_naming_its_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="Debian's package kcat"):
        system_tools.require("kcat")
    monkeypatch.setattr(system_tools.os, "geteuid", lambda: 1000)  # not root: nothing to install with
    assert system_tools.install(["node", "kcat"]) == 1


def test_no_test_looks_for_a_program_of_the_list_or_skips_without_it_on_its_own():
    programs = "|".join(re.escape(c) for candidates, _ in system_tools.PROGRAMS.values() for c in candidates)
    looked_up = re.compile(rf"""which\(["'](?:{programs})["']\)|exists\(["']/usr/bin/|skipif\([A-Z]+ is None""")
    offenders = [f"{path.relative_to(TESTS)}:{n}" for path in TESTS.rglob("*.py") if path.name != "system_tools.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if looked_up.search(line)]
    assert offenders == [], "ask tests/system_tools.py's require() instead"
