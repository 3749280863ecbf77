# The two commands of the README: `make run` and `make test`. Both create the virtual
# environment on first use, so a fresh machine needs nothing but Python 3.11+.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

HOST ?= 127.0.0.1
PORT ?= 9092
DATA_DIR ?= ./data
# The admin endpoint (metrics, faults, the web console: `ottla console`), on 127.0.0.1.
ADMIN_PORT ?= 9644
# The built-in schema registry (Confluent's REST API), on 127.0.0.1.
SCHEMA_REGISTRY_PORT ?= 8081

.PHONY: run test conformance bench fuzz soak crash-soak clean kafka spark-kafka avro lint

# The programs the tests run that pip does not install (kcat, chromium, a JDK, Maven,
# Node.js, strace): each step that needs some installs Debian's packages of the missing
# ones when make runs as root, and otherwise stops naming the packages
# (tests/system_tools.py holds the list; the tests ask it too).
SYSTEM_TOOLS := $(PYTHON) tests/system_tools.py install

# Apache Kafka 4.3.1, the reference the tests compare Ottla with, and the JVM programs run
# against both brokers (Kafka's tools, Streams, Connect, MirrorMaker 2): copied once from
# Maven Central into an ignored cache (tests/reference/pom.xml lists them). The plugin's
# version is explicit: Maven 3.8's default maven-dependency-plugin is too old to resolve them.
KAFKA_LIBS := .cache/kafka-4.3.1/libs
MVN_DEPENDENCY := org.apache.maven.plugins:maven-dependency-plugin:3.8.1
$(KAFKA_LIBS)/.complete: tests/reference/pom.xml
	$(SYSTEM_TOOLS) mvn java
	rm -rf $(KAFKA_LIBS) $(KAFKA_LIBS).partial
	mvn -q -B -f tests/reference/pom.xml $(MVN_DEPENDENCY):copy-dependencies \
		-DoutputDirectory=$(abspath $(KAFKA_LIBS)).partial -DincludeScope=runtime
	mv $(KAFKA_LIBS).partial $(KAFKA_LIBS)
	touch $@

kafka: $(KAFKA_LIBS)/.complete

# Spark's own Kafka connector (format("kafka")), which the pipeline tests run beside
# format("ottla"): a pom of its own (tests/reference/spark-kafka-pom.xml says why), copied
# once into an ignored cache and handed to Spark as local jars (spark.jars).
SPARK_KAFKA_LIBS := .cache/spark-kafka/libs
$(SPARK_KAFKA_LIBS)/.complete: tests/reference/spark-kafka-pom.xml
	$(SYSTEM_TOOLS) mvn java
	rm -rf $(SPARK_KAFKA_LIBS) $(SPARK_KAFKA_LIBS).partial
	mvn -q -B -f tests/reference/spark-kafka-pom.xml $(MVN_DEPENDENCY):copy-dependencies \
		-DoutputDirectory=$(abspath $(SPARK_KAFKA_LIBS)).partial -DincludeScope=runtime
	mv $(SPARK_KAFKA_LIBS).partial $(SPARK_KAFKA_LIBS)
	touch $@

spark-kafka: $(SPARK_KAFKA_LIBS)/.complete

# Apache Avro's Java library, whose Schema.toString() the registry's AVRO text is compared
# with (tests/reference/avro-pom.xml), copied once into an ignored cache.
AVRO_LIBS := .cache/avro/libs
$(AVRO_LIBS)/.complete: tests/reference/avro-pom.xml
	$(SYSTEM_TOOLS) mvn java
	rm -rf $(AVRO_LIBS) $(AVRO_LIBS).partial
	mvn -q -B -f tests/reference/avro-pom.xml $(MVN_DEPENDENCY):copy-dependencies \
		-DoutputDirectory=$(abspath $(AVRO_LIBS)).partial -DincludeScope=runtime
	mv $(AVRO_LIBS).partial $(AVRO_LIBS)
	touch $@

avro: $(AVRO_LIBS)/.complete

# Each target installs only what it needs: the broker alone for `run`; the clients,
# PySpark and the rest of the test tools for `test`; the peer brokers for `bench`.
# The editable install maps each folder to its `ottla.*` name with a meta path finder, and
# setuptools prints a notice about that finder on every such install: informational, and
# nothing to act on, so it is filtered out of the output.
EDITABLE_QUIET := PYTHONWARNINGS="ignore:Editable installation"

# The C extensions (protocol/*.c, broker/network/*.c, coordinator/*.c, storage/*.c) are built by the install: a changed source reinstalls.
$(VENV)/.installed-base: pyproject.toml setup.py $(wildcard protocol/*.c) $(wildcard protocol/*.h) $(wildcard broker/network/*.c) \
		$(wildcard coordinator/*.c) $(wildcard storage/*.c)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-base pyproject.toml
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@

# ruff over the whole tree; mypy over the product packages under their installed names.
LAYERS := broker protocol storage coordinator pipeline schema_registry console tools testing
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	mkdir -p .cache/mypy/ottla
	touch .cache/mypy/ottla/__init__.py
	for layer in $(LAYERS); do ln -sfn ../../../$$layer .cache/mypy/ottla/$$layer; done
	$(BIN)/mypy -p ottla

$(VENV)/.installed-bench: $(VENV)/.installed-base
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@

run: $(VENV)/.installed-base
	$(BIN)/ottla serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR) --admin-port $(ADMIN_PORT) \
		--override schema.registry.listeners=http://127.0.0.1:$(SCHEMA_REGISTRY_PORT)

# The checkers first: a finding fails the run before the long suite starts. The suite runs
# in TEST_WORKERS processes (pytest-xdist): most of a test's time is spent waiting on brokers,
# clients and JVMs, so three workers fit two cores. A module's tests run in one worker, all
# Spark tests in one (tests/conftest.py's scheduler). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3
TEST_PROGRAMS := kcat chromium java javac node npm strace
test: lint $(VENV)/.installed-test $(KAFKA_LIBS)/.complete $(SPARK_KAFKA_LIBS)/.complete $(AVRO_LIBS)/.complete
	$(SYSTEM_TOOLS) $(TEST_PROGRAMS)
	$(BIN)/python -m pytest -m "not kafka" -n $(TEST_WORKERS)

# Every test that runs Apache Kafka 4.3.1 beside Ottla and compares them: the differential
# suite, Kafka's tools and clients, Streams, Spark's Kafka connector, Connect, MirrorMaker 2.
conformance: $(VENV)/.installed-test $(KAFKA_LIBS)/.complete $(SPARK_KAFKA_LIBS)/.complete
	$(SYSTEM_TOOLS) $(TEST_PROGRAMS)
	$(BIN)/python -m pytest -m kafka

bench: $(VENV)/.installed-bench $(KAFKA_LIBS)/.complete
	$(BIN)/python -m bench

# A million mutated requests, each on a fresh connection, against a broker of its own
# (the test suite runs a seeded share of them). FRAMES=... to send more or fewer.
FRAMES ?= 1000000
fuzz: $(VENV)/.installed-test
	$(BIN)/python -m tests.fuzz.fuzzer --frames $(FRAMES)

# 1,000 client connections (producers, a consumer group, abusive clients) for 10
# minutes, then 100 kill -9 cycles, then 10 more under a Kafka Streams exactly_once_v2
# application with group.protocol=streams; reports lost and duplicated records, memory,
# descriptors, produce latency and whether the Streams output was exact (bench/soak.py).
# Then power loss, simulated: the crash-consistency harness over thousands of crash
# states (crash-soak).
soak: $(VENV)/.installed-test
	$(BIN)/python -m bench.soak
	$(MAKE) crash-soak

# The crash-consistency harness (tests/crash): STATES crash states of recorded workloads
# with --fsync (a new recording every 250), then half as many in the default mode (which
# reports what it loses: more is undecided there), JOBS at a time. make test runs 80.
STATES ?= 3000
JOBS ?= 2
crash-soak: $(VENV)/.installed-test
	$(BIN)/python -m tests.crash --states $(STATES) --scale 2 --jobs $(JOBS)
	$(BIN)/python -m tests.crash --states $$(( $(STATES) / 2 )) --scale 2 --jobs $(JOBS) --no-fsync

clean:
	rm -rf $(VENV) build *.egg-info .cache
