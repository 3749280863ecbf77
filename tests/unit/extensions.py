"""The optional C extensions (setup.py) as the unit tests that compare them with their
Python references need them.

An extension missing where a C compiler exists means the build broke: the tests fail and
say so. Where no compiler exists (an install that fell back to Python, which must still
pass `make test`) there is nothing compiled to compare: the comparing module is skipped
with that reason, and the rest of the suite tests the Python path the install runs."""

from __future__ import annotations

import importlib
import shutil
import sysconfig
from types import ModuleType

import pytest


def compiled_extension(name: str, package: str = "ottla.protocol") -> ModuleType:
    """`<package>.<name>` (ottla.protocol.<name> is built from protocol/<name>.c)."""
    try:
        return importlib.import_module(f"{package}.{name}")
    except ImportError:
        compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if shutil.which(compiler):
            pytest.fail(f"{package}.{name} (a .c file) was not built although {compiler} is here: reinstall "
                        "(make .venv/.installed-test) and read the build's output", pytrace=False)
        pytest.skip(f"no C compiler ({compiler}): this install runs the Python path alone, which the "
                    "rest of the suite tests", allow_module_level=True)
        raise
