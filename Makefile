# Two commands for a new user: `make run` and `make test`. Both set up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STATE  := .state
export PREFECT_HOME := $(CURDIR)/$(STATE)/prefect
# Local mode: Prefect starts its own temporary API server; its first start can take ~20 s.
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 90
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1

.PHONY: setup run test test-fast lint typecheck pytest clean

SAMPLE    := data/sample/census.parquet
PREFECTDB := $(PREFECT_HOME)/prefect.db

setup: $(STAMP) $(PREFECTDB)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,synth]'
	touch $(STAMP)

# Prefect's local mode migrates its database on first start (~10 s); do it once here.
$(PREFECTDB): $(STAMP)
	mkdir -p $(PREFECT_HOME)
	$(BIN)/prefect server database upgrade -y > /dev/null

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

pytest: setup
	$(BIN)/pytest -q

test: lint typecheck pytest

# The tier for your own loop (under a minute on 2 cores): lint, and every test not marked slow
# (tests/conftest.py: Prefect, subprocesses, browser, PostgreSQL, seeded audits are slow).
test-fast: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -q -m "not slow"

clean:
	rm -rf $(STATE) data/sample
