# The two commands: `make demo` runs the main job, `make test` runs the tests. Each sets up first.
.PHONY: setup demo test test-fast clean

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/python -m akf_devtools.demo

# The gates first (lint, format, types, import layers), then two workers, each taking whole test files (a
# file's tests share its sandbox and run in order).
test:
	@scripts/setup.sh --browser
	@$(MAKE) --no-print-directory lint
	.venv/bin/python -m pytest -q -n 2 --dist loadfile

# What CI enforces before the tests; each fails on any finding.
.PHONY: lint
lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	.venv/bin/lint-imports

# The inner loop: pure logic only, no Kafka, no Spark (a few seconds).
test-fast: setup
	.venv/bin/python -m pytest -q -m "not sandbox and not spark"

# Airflow 3 on this machine with the provider, the sandbox and the example pair (Ctrl-C stops everything).
.PHONY: airflow
airflow: setup
	.venv/bin/python -m akf_devtools.local_airflow $(AIRFLOW_ARGS)

clean:
	rm -rf .run .airflow results

# The option tables of docs/reference.md and the JSON Schemas of the pair config and the job settings file,
# generated from the models; a unit test fails when the committed ones differ.
.PHONY: reference
reference:
	.venv/bin/python scripts/gen_reference.py

# Every benchmark, one after the other (sandboxes and Spark; long on 2 cores): a table of the figures and
# results/benchmarks.json with the machine. BENCH_ARGS="--quick" for a smoke run, "--only rto,redelivery" for some.
.PHONY: bench
bench: setup
	.venv/bin/python benchmarks/run_all.py $(BENCH_ARGS)
