PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench lint regen clean

PURE_INTEGRATION := $(addprefix tests/integration/,test_producer.py test_producer_faults.py \
	test_consumer.py test_consumer_group.py test_transactions.py)

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py sdk/records/_fast.c
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $(STAMP)

# Apache Kafka's jars are fetched once into ~/.cache/kafka-sdk (or $$KAFKA_SDK_CACHE).
# The second pytest pass runs the same code without the compiled fast path: the unit suite
# and the record-heavy integration files, on our broker only.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy sdk server_ref
	$(BIN)/python tools/apache_kafka.py fetch --optional
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=30
	KAFKA_SDK_PURE_PYTHON=1 KAFKA_SDK_TEST_TARGETS=ref $(BIN)/python -m pytest -q -n 2 \
		--dist loadfile tests/unit $(PURE_INTEGRATION)

demo: $(STAMP)
	$(BIN)/python examples/demo_pipeline.py

# Every benchmark, each against its peers in the same run (figures go into the README).
bench: $(STAMP)
	$(BIN)/python bench/import_time.py
	$(BIN)/python bench/startup_bench.py
	$(BIN)/python bench/records_bench.py
	$(BIN)/python bench/fast_path_bench.py
	$(BIN)/python bench/follower_replay_bench.py
	$(BIN)/python bench/producer_bench.py --broker ref,apache --batch-size 1000000
	$(BIN)/python bench/producer_bench.py --broker ref,tansu,apache
	$(BIN)/python bench/consumer_bench.py --broker ref,apache
	$(BIN)/python bench/consumer_bench.py --broker tansu --modes assign
	$(BIN)/python bench/consumer_bench.py --broker tansu --modes group --sizes 100
	$(BIN)/python bench/consumer_bench.py --broker tansu --modes group --sizes 1000
	$(BIN)/python bench/broker_bench.py --peer tansu
	$(BIN)/python bench/broker_bench.py --peer apache
	$(BIN)/python bench/broker_bench.py --cluster
	$(BIN)/python bench/spark_bench.py
	$(BIN)/python bench/tiered_bench.py

lint: $(STAMP)
	$(BIN)/ruff check .

regen: $(STAMP)
	$(BIN)/python tools/generate_protocol.py

clean:
	rm -rf $(VENV) build *.egg-info
