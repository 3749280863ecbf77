"""The one thing pyproject.toml cannot say without an experimental table: the optional C
extension. protocol/_records.c walks a produced batch's records; where it cannot be
built (no compiler, as in the slim container image) the install goes on without it and
protocol/records.py falls back to Python. Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ottla.protocol._records", sources=["protocol/_records.c"], optional=True)])
