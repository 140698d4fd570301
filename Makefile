# Every target sets up what it needs: a fresh machine only needs python3.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE := $(VENV)/.installed-base

.PHONY: demo test lint typecheck unit bench integration browser promtool kafka oracle clients clean

# The demo needs the package alone; tests, lint and benchmarks need every extra.
$(BASE): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/pip install --quiet -e '.[dev,bench,spark]'
	touch $(STAMP)

demo: $(BASE)
	$(BIN)/rackplan demo

lint: $(STAMP)
	$(BIN)/ruff check rackplan assignor agent fleet tests bench integration
	$(BIN)/ruff format --check rackplan assignor agent fleet tests bench integration

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests

integration: $(STAMP) kafka
	integration/run_suite.sh $(BIN)/pytest integration

# Real Apache Kafka (broker, tools, clients, streams) resolved by Maven into
# integration/kafka/lib: the cluster the integration suite starts on loopback.
KAFKA_LIB := integration/kafka/lib/.resolved
$(KAFKA_LIB): integration/kafka/pom.xml
	rm -rf integration/kafka/lib
	mvn -q -B -f integration/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
	touch $(KAFKA_LIB)

# Java programs the suite runs on that cluster (Kafka's own assignors, a Streams app).
KAFKA_APPS := integration/kafka/apps/target/rackplan-it-apps.jar
$(KAFKA_APPS): integration/kafka/apps/pom.xml $(wildcard integration/kafka/apps/src/main/java/dev/rackplan/it/*.java) clients/java/target/rackplan-clients.jar
	mvn -q -B -f integration/kafka/apps/pom.xml package

kafka: $(KAFKA_LIB) $(KAFKA_APPS)

# Headless Chromium renders the fleet report in a test; installed from Debian's
# packages where we may (root with apt-get), else that test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	      || echo "chromium could not be installed: the report rendering test will skip"; \
	  else echo "no chromium and no root apt-get: the report rendering test will skip"; fi; }

# promtool checks the agent's /metrics, the alerting rules and the dashboard's queries,
# amtool the Alertmanager config (tests/promtool.py, tests/test_monitoring.py). Debian's
# `prometheus` and `prometheus-alertmanager` packages ship them (measured on bookworm:
# promtool 2.42.0, amtool 0.25.0); without them those tests skip locally and fail in CI.
promtool:
	@{ command -v promtool && command -v amtool; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null \
	      || echo "prometheus (promtool) could not be installed: the promtool tests will skip (fail in CI)"; \
	  else echo "no promtool and no root apt-get: the promtool tests will skip (fail in CI)"; fi; }

# Kafka's own assignors (Java 17, Maven) as the tests' oracle: tests/kafka_oracle.py.
ORACLE_JAR := oracle/target/rackplan-oracle.jar
oracle: $(ORACLE_JAR)

$(ORACLE_JAR): oracle/pom.xml $(shell find oracle/src -name '*.java')
	mvn -q -B -f oracle/pom.xml package
	touch $@

test: lint typecheck browser promtool kafka oracle clients $(STAMP)
	$(BIN)/pytest tests
	integration/run_suite.sh $(BIN)/pytest integration

# rackplan's JVM side (docs/java.md): RackplanAssignor, RackplanServerAssignor, RackplanTaskAssignor in
# one jar without dependencies of its own; its JUnit tests run in the build. Offline when Maven's cache
# has everything (fast), else Maven Central. The real cluster puts it on the brokers' classpath.
CLIENTS_JAR := clients/java/target/rackplan-clients.jar
clients: $(CLIENTS_JAR)

$(CLIENTS_JAR): clients/java/pom.xml $(shell find clients/java/src -name '*.java')
	mvn -q -B -o -f clients/java/pom.xml package || mvn -q -B -f clients/java/pom.xml package
	touch $@

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) integration/kafka/lib integration/kafka/apps/target clients/java/target .mypy_cache .pytest_cache .ruff_cache .hypothesis

# The JSON Schemas of the control topics' records, regenerated from rackplan.agent.protocol.models
# (package copies and docs/*-schema.json; tests/agent/protocol/test_protocol.py fails when they drift).
.PHONY: schemas
schemas: $(BASE)
	$(BIN)/python -m rackplan.agent.protocol.schemas --write
