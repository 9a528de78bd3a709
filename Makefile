# The two commands: `make demo` runs the main job, `make test` runs the tests. Each sets up first.
.PHONY: setup demo test test-fast clean

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/python -m airflow_kafka_failover.demo

# Two workers, each taking whole test files (a file's tests share its sandbox and run in order).
test: setup
	.venv/bin/python -m pytest -q -n 2 --dist loadfile

# The inner loop: pure logic only, no Kafka, no Spark (a few seconds).
test-fast: setup
	.venv/bin/python -m pytest -q -m "not sandbox and not spark"

clean:
	rm -rf .run .airflow results
