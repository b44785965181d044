# evalstream — every entry point a user or CI needs. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?= stream_app/data/scylla-runs.jsonl
# The installer, into .venv by pip: uv resolves and installs the extras in seconds where pip took
# half a minute of every fresh clone's `make test` (and again for each .venv-3.X). Pinned.
UV     := uv==0.13.9
# The supported CPythons: pyproject.toml's classifiers, the one list.
PYTHONS := $(shell sed -n 's/.*"Programming Language :: Python :: \(3\.[0-9]*\)".*/\1/p' pyproject.toml)
# The modules whose code branches on the Python version, type-checked for each supported one
# (tests/test_supported_pythons.py keeps the list whole).
VERSIONED := stream_app/service/faust_transport.py stream_app/code_quality/code_bleu/python_grammar.py

.DEFAULT_GOAL := help
.PHONY: help install demo observe replay test test-fast test-pythons tools bench simulate lint format schemas clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	@$(PYTHON) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; sys.exit(None if v in "$(PYTHONS)".split() else f"evalstream supports CPython $(PYTHONS); $(PYTHON) is {v}: make PYTHON=python3.X")'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	@# uv byte-compiles what it installs, in parallel: where PYTHONDONTWRITEBYTECODE is set (as in
	@# many CI images) Python never caches what it compiles, and every process would compile every
	@# module it imports, every time (a second of CPU per worker started, twice that for inspect_ai).
	$(BIN)/python -m pip install --quiet --no-compile '$(UV)'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev,embedded,inspect,prices]'
	@touch $@

install: $(STAMP) ## create .venv and install evalstream with its dev, embedded, inspect and prices extras

demo: $(STAMP) ## the main job: live demo on the embedded broker (Ctrl-C stops)
	$(BIN)/stream-app demo $(DEMO_ARGS)

observe: $(STAMP) ## Prometheus + Alertmanager on loopback against the local worker, alerts printed (Ctrl-C stops)
	@scripts/install-prometheus.sh >/dev/null
	$(BIN)/stream-app observe $(OBSERVE_ARGS)

replay: $(STAMP) ## replay DATA=file.jsonl (default: the bundled real runs)
	$(BIN)/stream-app replay $(DATA)

lint: $(STAMP) ## ruff, ruff format --check, mypy --strict, generated files current
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --explicit-package-bases stream_app schemas tests bench grafana/generate.py prometheus/generate_tests.py
	@# The run above checked them for the version pyproject.toml gives mypy: the others only.
	@own=$$(sed -n 's/^python_version = "\(.*\)"/\1/p' pyproject.toml); \
	for v in $(PYTHONS); do [ "$$v" = "$$own" ] && continue; echo "mypy --python-version $$v $(VERSIONED)"; \
		$(BIN)/mypy --python-version $$v --follow-imports=silent $(VERSIONED) || exit 1; done
	$(BIN)/python -m schemas.export --check
	$(BIN)/python grafana/generate.py --check
	$(BIN)/python prometheus/generate_tests.py --check

test: $(STAMP) tools ## the whole suite (docs/development.md; TEST_ARGS=--record writes its figures there)
	$(BIN)/python scripts/test-suite.py $(TEST_ARGS)

tools: ## Apache Kafka (Maven), Prometheus, promtool, amtool and bubblewrap into .tools/ (tests skip without them)
	-@scripts/install-kafka.sh
	-@scripts/install-prometheus.sh
	-@scripts/install-sandbox.sh

test-fast: $(STAMP) ## every test but the integration tests (no broker, no worker)
	$(BIN)/pytest -m "not integration" -n 2 --dist loadgroup

test-pythons: $(STAMP) ## the unit and property tests (all of them) on every other supported CPython found (python3.X or pyenv), each in .venv-3.X
	scripts/test-pythons.sh

bench: $(STAMP) ## the benchmark on Apache Kafka (minutes; BENCH_ARGS="--broker tansu" for Tansu; writes BENCHMARKS.md)
	@scripts/install-kafka.sh >/dev/null
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev,embedded,inspect,prices,bench]'
	$(BIN)/python bench/run.py $(BENCH_ARGS)

simulate: $(STAMP) ## the seeded simulations at full size, then the drop page's and the intervals' (docs/statistics-measured.md; SIMULATE_ARGS=--quick)
	EVALSTREAM_SIMULATIONS=full $(BIN)/pytest -m simulation -p no:cacheprovider -n 2 --durations=10
	$(BIN)/python bench/detection.py $(SIMULATE_ARGS)

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schemas: $(STAMP) ## regenerate schemas/json from the pydantic models
	$(BIN)/python -m schemas.export

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) $(addprefix .venv-,$(PYTHONS)) .tools .test-reports .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
