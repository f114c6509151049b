# Everything a newcomer needs: `make run` (the local stack) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-measured test-fast test-unit test-live system-packages system-packages-fast bench clean \
	mutation

install: $(STAMP)

# Re-installs only when pyproject.toml or this recipe changes (a venv made by an older recipe, e.g. without bytecode,
# is redone), so repeated runs are fast.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# uv: `make install` in a fresh clone 9.6 s where pip took ~48 s of every clean clone's `make test` (BENCHMARKS.md
	# "Test suite"), the same versions (`pip freeze` of both compared). pip installs uv itself. Then the bytecode, which
	# pip writes by default and uv does not: with PYTHONDONTWRITEBYTECODE set (as on the reference machine) every
	# process otherwise compiled Dagster from source again (`import dagster` 2.6-3.1 CPU-s instead of 1.0-1.4).
	# compileall rather than uv's --compile-bytecode, which skips packages already installed: it also mends a venv an
	# older recipe made (~12 s when nothing is compiled, ~3 s when all is). The packages' own test suites (pandas'
	# ~1,100 modules among them) are never imported: left out, ~25 CPU-s instead of ~33 in a fresh clone.
	$(BIN)/python -m pip install -q uv==0.13.9
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[test]'
	$(BIN)/python -m compileall -q -j 0 -x '/site-packages/.+/tests/' $(VENV)/lib > /dev/null
	touch $(STAMP)

run: install
	$(BIN)/python -m local_stack $(SIM_ARGS)

# Side by side on TEST_WORKERS pytest-xdist workers. Each test file runs whole on one worker, the rest of
# tests/production with the live production test; the long units (the alert path's and the live production's compose
# deployments, side by side on one engine, the Postgres outage, the live stack) start first, each on a worker of its
# own, and the workers freed first share the rest (tests/conftest.py). Five on the 2-core reference machine: with
# four, a sixth of the CPU stood idle (293 of 1,980 CPU-s; pytest 985 s against 885 s with five, 89 idle) while the
# long units waited on their stacks and one worker ran the short files. Six fill most of what five leave idle, and the
# host spends as much more on the rest: in the same hour a fresh machine's `.ci/run` took 876 s with six (85 CPU-s
# idle, 1,670 busy) against 870 s with five (156, 1,588); images cached, 845 s against 864 s. A worker running short
# files is niced (tests/conftest.py, "Who gets the CPU first"): at equal weight four workers starved the outage stack
# (BENCHMARKS.md "Test suite").
TEST_WORKERS ?= 5

# Each xdist worker collects the whole suite, rewriting the asserts of every test module (pytest's assertion rewriting):
# ~26 CPU-s a worker, measured under coverage.py's tracer. With PYTHONDONTWRITEBYTECODE set (as on the reference
# machine) none writes pytest's cache of the rewritten modules, so each does it all again. One collection without
# coverage first writes that cache (~14 s), which the workers then read: 5 workers started in 38 s and 68 CPU-s instead
# of 65-72 s and 130 CPU-s (BENCHMARKS.md "Test suite"). Its own failure is left to the real run to report.
COLLECT_ONCE = PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider -p no:xdist \
	$(PYTEST_ARGS) > /dev/null 2>&1 || true

# The compose form's images, built in the background from here on (tests/production/prebuild_images.py): on a fresh
# machine the builds held up the alert path's deployment, the suite's longest unit, by 245-268 s; started before the
# collection they overlap it and the workers' start-up. By default only for the whole suite (a run of a few files may
# need none); BUILD_IMAGES_AHEAD=1 or 0 says so either way.
BUILD_IMAGES_AHEAD ?= $(if $(strip $(PYTEST_ARGS)),0,1)
PREBUILD_IMAGES = $(if $(filter 1,$(BUILD_IMAGES_AHEAD)),mkdir -p test-artifacts \
	&& $(BIN)/python -m tests.production.prebuild_images > test-artifacts/prebuild-images.log 2>&1 &,\
	: no images built ahead: BUILD_IMAGES_AHEAD=$(BUILD_IMAGES_AHEAD))

# Line coverage of the packages ([tool.slipcover] in pyproject.toml), with a floor of 80%. SlipCover instruments the
# packages' bytecode and drops each probe once its line has run; coverage.py's tracer is called on every line and call,
# Dagster's included: on a fresh machine `.ci/run` took 984-1,021 s under it (sampled: 1,828-1,891 busy CPU-s), under
# SlipCover 858-938 s (1,491-1,765; BENCHMARKS.md "Test suite"). The floor is checked on the report it writes
# (`--merge`): its own --fail-under deletes the workers' data before printing the table. COVERAGE=0 runs the suite
# without it.
COVERAGE ?= 1
COVERAGE_JSON = test-artifacts/coverage.json
RUN_TESTS = $(if $(filter 1,$(COVERAGE)),mkdir -p test-artifacts && $(BIN)/python -m slipcover --json \
	--out $(COVERAGE_JSON) -m pytest,$(BIN)/python -m pytest)
COVERAGE_FLOOR = $(if $(filter 1,$(COVERAGE)),$(BIN)/python -m slipcover --merge $(COVERAGE_JSON) --out /dev/null \
	--skip-covered --fail-under 80,: no coverage: COVERAGE=$(COVERAGE))

test: install system-packages
	$(PREBUILD_IMAGES)
	$(COLLECT_ONCE)
	$(RUN_TESTS) -n $(TEST_WORKERS) $(PYTEST_ARGS); status=$$?; $(COVERAGE_FLOOR) && exit $$status

# The same suite, measured (BENCHMARKS.md "Test suite"): test-artifacts/junit.xml carries each test's CPU seconds and
# worker for bench/suite_times.py (time and CPU per file), and bench/suite_host.py then prints what CPU the host gave
# the run and when each worker ended.
test-measured: install system-packages
	$(BIN)/python bench/suite_host.py snapshot test-artifacts/host-start.json
	$(PREBUILD_IMAGES)
	$(COLLECT_ONCE)
	$(RUN_TESTS) -n $(TEST_WORKERS) --junitxml=test-artifacts/junit.xml --durations=15 $(PYTEST_ARGS); \
	status=$$?; $(BIN)/python bench/suite_host.py report test-artifacts/host-start.json test-artifacts/junit.xml; \
	$(COVERAGE_FLOOR) && exit $$status

# The Debian packages the tests run (promtool, amtool, nginx; for the whole suite also chromium, docker.io and
# mmdebstrap), installed when missing: as root, or through sudo, saying so (tools/system_packages.sh).
system-packages:
	tools/system_packages.sh all

system-packages-fast:
	tools/system_packages.sh fast

# The inner loop: everything that needs no Docker engine and no whole stack (markers `production` and `slow`), side by
# side. `make test` and CI run everything.
FAST_WORKERS ?= 3
test-fast: install system-packages-fast
	$(BIN)/python -m pytest -n $(FAST_WORKERS) -m 'not slow and not production' $(PYTEST_ARGS)

# The compose deployment on a real Docker engine (part of `make test` too); needs docker.io and mmdebstrap, and root
# to start dockerd when no engine is running.
test-live: install system-packages
	$(BIN)/python -m pytest -m production -s $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

# Mutation testing of the decision modules (tools/mutation.py, BENCHMARKS.md "Test strength"): all of them, or one with
# MODULE=path/to/module.py. Each gets a fresh mutants/ copy and its fast tests, one mutant at a time.
mutation: install
	$(BIN)/python tools/mutation.py $(MODULE)

clean:
	rm -rf .local .pytest_cache .coverage mutants test-artifacts/coverage.json
