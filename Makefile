# The two commands of the README: `make run` and `make test`. Both create the virtual
# environment on first use, so a fresh machine needs nothing but Python 3.11+.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

HOST ?= 127.0.0.1
PORT ?= 9092
DATA_DIR ?= ./data
# The admin endpoint (metrics, faults, the web console: `ottla console`), on 127.0.0.1.
ADMIN_PORT ?= 9644

.PHONY: run test bench fuzz soak clean

# Each target installs only what it needs: the broker alone for `run`; the clients,
# PySpark and the rest of the test tools for `test`; the peer brokers for `bench`.
# The editable install maps each folder to its `ottla.*` name with a meta path finder, and
# setuptools prints a notice about that finder on every such install: informational, and
# nothing to act on, so it is filtered out of the output.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

$(VENV)/.installed-base: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-base
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-base
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@

run: $(VENV)/.installed-base
	$(BIN)/ottla serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR) --admin-port $(ADMIN_PORT)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench

# A million mutated requests, each on a fresh connection, against a broker of its own
# (the test suite runs a seeded share of them). FRAMES=... to send more or fewer.
FRAMES ?= 1000000
fuzz: $(VENV)/.installed-test
	$(BIN)/python -m tests.fuzz.fuzzer --frames $(FRAMES)

# 1,000 client connections (producers, a consumer group, abusive clients) for 10
# minutes, then 100 kill -9 cycles; reports lost and duplicated records, memory,
# descriptors and produce latency (bench/soak.py).
soak: $(VENV)/.installed-test
	$(BIN)/python -m bench.soak

clean:
	rm -rf $(VENV) build *.egg-info
