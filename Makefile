# The two commands a newcomer needs: `make run` and `make test`. Each sets itself up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HTTP ?= 127.0.0.1:8765

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(VENV)/.installed $@

run: $(VENV)/.installed
	$(BIN)/mcp-harness serve --http $(HTTP)

test: $(VENV)/.installed-test
	$(BIN)/ruff check mcp_harness tests bench
	$(BIN)/pyright
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
