# Every target sets up what it needs: a fresh machine only needs python3.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench integration clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rackplan demo

lint: $(STAMP)
	$(BIN)/ruff check assignor agent tests bench integration
	$(BIN)/ruff format --check assignor agent tests bench integration

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests

integration: $(STAMP)
	$(BIN)/pytest integration

test: lint typecheck $(STAMP)
	$(BIN)/pytest tests integration

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
