# Every target sets up what it needs: a fresh machine only needs python3.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BASE := $(VENV)/.installed-base

.PHONY: demo test lint typecheck unit bench integration browser promtool go-tools crd-schemas kafka oracle clients clients-4.3 clean

# The demo needs the package alone; tests, lint and benchmarks need every extra. The install
# compiles the flow core (assignor/flow/_flowcore.c, optional: skipped without a C compiler) in
# place, so a change of its source reinstalls.
$(BASE): pyproject.toml assignor/flow/_flowcore.c assignor/flow/_readback.c assignor/flow/_nodes.c assignor/flow/_shift.c assignor/flow/_range.c assignor/flow/_constrained.c assignor/flow/_withhold.c assignor/flow/_flowcore.h
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

# The unit suite on every core, a file per worker at a time (module fixtures, such as the Kafka oracle's
# JVM, stay one per worker); PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
UNIT := $(BIN)/pytest tests -n $(PYTEST_WORKERS) --dist loadfile

unit: $(STAMP)
	$(UNIT)

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

# Kafka 4.3's client: one follower test runs rackplan's jar in a 4.3 application (integration/kafka/clients-4.3).
KAFKA_CLIENTS_43 := integration/kafka/clients-4.3/lib/.resolved
$(KAFKA_CLIENTS_43): integration/kafka/clients-4.3/pom.xml
	rm -rf integration/kafka/clients-4.3/lib
	mvn -q -B -f integration/kafka/clients-4.3/pom.xml dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
	touch $(KAFKA_CLIENTS_43)

kafka: $(KAFKA_LIB) $(KAFKA_APPS) $(KAFKA_CLIENTS_43)

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

# Go tools from the Go module proxy for the checks of deploy/ and the Grafana dashboard
# (tests/go_tools.py, tests/test_deploy.py, tests/test_monitoring.py): helm (lint, template),
# kubeconform with the Kubernetes JSON Schemas made from k8s.io/kubernetes' own OpenAPI document
# (tests/kube_schemas.py), and monitoring/grafana/check (Grafana's dashboard model). Built once
# into GO_TOOLS, outside the clone, so later runs and clones on the machine reuse them; a
# version change rebuilds. Cold, CPU time: helm 190 s, kubeconform 38 s, the dashboard check 55 s
# (docs/deploy.md, "How it is tested"). Without Go the tests skip locally and fail in CI.
GO_TOOLS ?= $(HOME)/.cache/rackplan-go-tools
# the tests find the tools here (tests/go_tools.py; ~/.cache/rackplan-go-tools when unset)
export GO_TOOLS
HELM_VERSION := v3.22.0
KUBECONFORM_VERSION := v0.8.0
K8S_VERSION := v1.37.2
GO_ENV := GOBIN=$(GO_TOOLS)/bin GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

go-tools:
	@command -v go >/dev/null 2>&1 || { echo "no go: the deploy and dashboard checks will skip (fail in CI)"; exit 0; }; \
	$(MAKE) --no-print-directory $(GO_TOOLS)/bin/.helm-$(HELM_VERSION) $(GO_TOOLS)/bin/.kubeconform-$(KUBECONFORM_VERSION) \
	  $(GO_TOOLS)/schemas/k8s-$(K8S_VERSION)/.made $(GO_TOOLS)/bin/dashboard-check \
	  || echo "the Go tools could not be built: the deploy and dashboard checks will skip (fail in CI)"

$(GO_TOOLS)/bin/.helm-$(HELM_VERSION):
	$(GO_ENV) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	touch $@

$(GO_TOOLS)/bin/.kubeconform-$(KUBECONFORM_VERSION):
	$(GO_ENV) go install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	touch $@

$(GO_TOOLS)/bin/dashboard-check: $(wildcard monitoring/grafana/check/*.go) monitoring/grafana/check/go.mod monitoring/grafana/check/go.sum
	cd monitoring/grafana/check && $(GO_ENV) go build -o $@ .

$(GO_TOOLS)/schemas/k8s-$(K8S_VERSION)/.made: tests/kube_schemas.py $(BASE)
	swagger="$$(go mod download -json k8s.io/kubernetes@$(K8S_VERSION) | $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')/api/openapi-spec/swagger.json" \
	  && $(BIN)/python -m tests.kube_schemas --swagger "$$swagger" --out $(dir $@)
	touch $@

# The Prometheus Operator's kinds for kubeconform (deploy/schemas, committed): the CRDs that
# controller-gen makes from the operator's Go types, as the operator's own build does. Run it
# when either version changes; `make test` does not need it.
CONTROLLER_TOOLS_VERSION := v0.23.0
PROMETHEUS_OPERATOR_VERSION := v0.95.2
crd-schemas: $(BASE)
	@command -v go >/dev/null 2>&1 || { echo "crd-schemas needs go"; exit 1; }
	$(GO_ENV) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	tmp=$$(mktemp -d) && cd $$tmp && go mod init crds >/dev/null 2>&1 \
	  && go get github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1@$(PROMETHEUS_OPERATOR_VERSION) \
	  && $(GO_TOOLS)/bin/controller-gen crd:crdVersions=v1 paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir=$$tmp/crds \
	  && cd $(CURDIR) && rm -rf deploy/schemas/monitoring.coreos.com \
	  && $(BIN)/python -m tests.kube_schemas --crds $$tmp/crds --out deploy/schemas; rc=$$?; rm -rf $$tmp; exit $$rc

# deploy/kubernetes/rackplan.yaml: the chart rendered with its defaults (tests/test_deploy.py
# fails when it differs from what the chart renders).
.PHONY: deploy-manifests
deploy-manifests: go-tools
	$(GO_TOOLS)/bin/helm template rackplan deploy/helm/rackplan --namespace rackplan --kube-version $(K8S_VERSION) > deploy/kubernetes/rackplan.yaml

# Kafka's own assignors (Java 17, Maven) as the tests' oracle: tests/kafka_oracle.py.
ORACLE_JAR := oracle/target/rackplan-oracle.jar
oracle: $(ORACLE_JAR)

$(ORACLE_JAR): oracle/pom.xml $(shell find oracle/src -name '*.java')
	mvn -q -B -f oracle/pom.xml package
	touch $@

# The unit suite runs beside the integration suite, niced: the integration suite mostly waits on its
# brokers and applications, and keeps the CPU when it needs it. The unit suite's output comes after the
# integration suite's; each prints its slowest tests. Both must pass.
test: lint typecheck browser promtool go-tools kafka oracle clients clients-4.3 $(STAMP)
	@log=$$(mktemp); trap 'kill $$unit 2>/dev/null; rm -f $$log' EXIT; \
	nice -n 10 $(UNIT) --durations=15 >$$log 2>&1 & unit=$$!; \
	integration/run_suite.sh $(BIN)/pytest integration --durations=15; it=$$?; \
	wait $$unit; ut=$$?; echo "== the unit suite (run beside the integration suite): exit $$ut"; cat $$log; \
	[ $$ut -eq 0 ] && [ $$it -eq 0 ]

# rackplan's JVM side (docs/java.md): RackplanAssignor, RackplanServerAssignor, RackplanTaskAssignor in
# one jar without dependencies of its own; its JUnit tests run in the build. Offline when Maven's cache
# has everything (fast), else Maven Central. The real cluster puts it on the brokers' classpath.
CLIENTS_JAR := clients/java/target/rackplan-clients.jar
clients: $(CLIENTS_JAR)

# The offline attempt's output is shown only when it failed for another reason than a missing
# artifact ("... in offline mode"): on a fresh cache it would be a 10-line [ERROR] block.
$(CLIENTS_JAR): clients/java/pom.xml $(shell find clients/java/src -name '*.java')
	@log=$$(mktemp); \
	if mvn -q -B -o -f clients/java/pom.xml package >$$log 2>&1; then rm -f $$log; \
	elif grep -q "in offline mode" $$log; then rm -f $$log; \
	  echo "clients: Maven's cache lacks an artifact: building with Maven Central"; \
	  mvn -q -B -f clients/java/pom.xml package; \
	else cat $$log; rm -f $$log; exit 1; fi
	touch $@

# The same sources but the KIP-1071 Streams plugin (KIP-1357's API, new in 4.4) against Kafka 4.3.1, with their
# JUnit tests (docs/java.md): in a copy of the module, so target/ keeps the 4.4 build.
.PHONY: clients-4.3
clients-4.3:
	@d=$$(mktemp -d); cp -r clients/java/pom.xml clients/java/src $$d/; \
	mvn -q -B -o -f $$d/pom.xml -Pkafka-4.3 test >$$d/log 2>&1 || \
	  { grep -q "in offline mode" $$d/log && mvn -q -B -f $$d/pom.xml -Pkafka-4.3 test >$$d/log 2>&1; } || \
	  { cat $$d/log; rm -rf $$d; exit 1; }; \
	rm -rf $$d; echo "clients-4.3: the JUnit tests pass against Kafka 4.3.1"

# rackplan-clients into the local Maven repository (~/.m2) as dev.rackplan:rackplan-clients:<version>,
# for a Maven or Gradle build's <dependency> (docs/java.md, "Install").
.PHONY: clients-install
clients-install: $(CLIENTS_JAR)
	mvn -q -B -f clients/java/pom.xml install -DskipTests

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) integration/kafka/lib integration/kafka/clients-4.3/lib integration/kafka/apps/target clients/java/target .mypy_cache .pytest_cache .ruff_cache .hypothesis

# The JSON Schemas of the control topics' records, regenerated from rackplan.agent.protocol.models
# (package copies and docs/*-schema.json; tests/agent/protocol/test_protocol.py fails when they drift).
.PHONY: schemas
schemas: $(BASE)
	$(BIN)/python -m rackplan.agent.protocol.schemas --write
