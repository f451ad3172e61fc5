# Two commands for a new user: `make run` and `make test`. Both set up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STATE  := .state
# `make run` is recorded in the Prefect server your Prefect settings name (PREFECT_API_URL or the
# active profile), if any; without one it runs without Prefect and starts no server.
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1

.PHONY: setup run test test-fast lint typecheck pytest clean

SAMPLE    := data/sample/census.parquet

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,synth]'
	touch $(STAMP)

$(SAMPLE): data/generate.py $(STAMP)
	$(BIN)/python data/generate.py --rows 50000 --seed 20261121 --out $(SAMPLE)

run: setup $(SAMPLE)
	$(BIN)/dppub run configs/demo.yaml --ledger $(STATE)/ledger.sqlite --out $(STATE)/published
	$(BIN)/dppub audit --ledger $(STATE)/ledger.sqlite

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: the suite starts hundreds of
# Python processes (`dppub` commands, Prefect servers and workers), each would compile dppub anew.
pytest: setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q

test: lint typecheck pytest

# The tier for your own loop (under a minute on 2 cores): lint, and every test not marked slow
# (tests/conftest.py: Prefect, subprocesses, browser, PostgreSQL, seeded audits are slow).
test-fast: setup
	$(BIN)/ruff check .
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -m "not slow"

clean:
	rm -rf $(STATE) data/sample
