# Everything a newcomer needs: `make run` (the local stack) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-unit test-live bench clean

install: $(STAMP)

# Re-installs only when pyproject.toml changes, so repeated runs are fast.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

run: install
	$(BIN)/python -m local_stack $(SIM_ARGS)

test: install
	$(BIN)/python -m pytest --cov --cov-report=term --cov-fail-under=80 $(PYTEST_ARGS)

# The compose deployment on a real Docker engine (part of `make test` too); needs docker.io and debootstrap, and root
# to start dockerd when no engine is running.
test-live: install
	$(BIN)/python -m pytest -m production -s $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

clean:
	rm -rf .local .pytest_cache .coverage
