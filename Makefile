# The two commands a newcomer needs: `make run` and `make test`. Each sets itself up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HTTP ?= 127.0.0.1:8765
# The JS reference encoder (`@ipld/dag-cbor`) that tests/hypermedia/test_dagcbor.py checks our DAG-CBOR against byte for byte.
JS_ORACLE := tests/js/node_modules/.installed

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

$(JS_ORACLE): tests/js/package.json tests/js/package-lock.json
	npm ci --prefix tests/js --silent --no-audit --no-fund
	touch $@

run: $(VENV)/.installed
	$(BIN)/mcp-harness serve --http $(HTTP)

test: $(VENV)/.installed-test $(JS_ORACLE)
	$(BIN)/ruff check mcp_harness tests bench
	$(BIN)/pyright
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# bench/webread.py's reference pipeline (the MCP fetch server's readabilipy + markdownify) and its markdown judge are
# installed for the bench only, never as dependencies; readabilipy installs its Readability.js half with npm itself.
# bench/tokens.py's tokenizer, bpe-openai, is a test extra (tests/verbs/test_contracts.py holds the same budget) and is named
# here too; the script npm-installs the reference MCP servers it compares against into the venv. It exits 1 when the
# verbs' tools/list is over budget, so it runs before the long web-read bench.
bench: $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet readabilipy markdownify lxml markdown-it-py mdit-py-plugins bpe-openai
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/delegate.py
	$(BIN)/python bench/hypermedia.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/upstream.py
	$(BIN)/python bench/memory_listing.py
	$(BIN)/python bench/webread.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/triggers.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
