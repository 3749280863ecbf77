# The two commands of the README: `make run` and `make test`. Both create the virtual
# environment on first use, so a fresh machine needs nothing but Python 3.11+.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

HOST ?= 127.0.0.1
PORT ?= 9092
DATA_DIR ?= ./data

.PHONY: run test bench clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,spark]'
	touch $(INSTALLED)

run: $(INSTALLED)
	$(BIN)/ottla serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

test: $(INSTALLED)
	$(BIN)/python -m pytest

bench: $(INSTALLED)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
