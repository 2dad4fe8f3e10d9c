# Two commands matter: `make run` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# make run HOST=0.0.0.0 PORT=9093 DATA=/tmp/kafka; KCOORD_* variables are honoured too.
HOST   ?= $(or $(KCOORD_HOST),127.0.0.1)
PORT   ?= $(or $(KCOORD_PORT),9092)
DATA   ?= $(or $(KCOORD_DATA_DIR),./data)
# pytest workers (pytest-xdist): the tests mostly wait on sockets, timers and the client
# programs' rebalances (with three workers the suite's CPU time is well short of twice its
# wall time on two cores), so four share two cores well; a test module runs whole in one
# worker (--dist loadfile). WORKERS=0: serial.
WORKERS ?= 4
# The server `make run` started, so that `make stop` finds it (one per port).
PIDFILE = $(VENV)/run-$(PORT).pid

.PHONY: run stop reset-data bench-report lint test test-fast test-pure compiled install install-test test-tools install-pipeline clients java-clients go-clients js-clients oracle bench report clean

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@$(PY) -c 'from protocol import compiled; print(compiled.notice())'
	touch $@

# The test extra is what `make test-fast` uses; the pipeline extra (pyspark and the report's
# libraries) serves only tests marked slow, so `make test` adds it.
$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test]'
	touch $@

$(VENV)/.installed-pipeline: $(VENV)/.installed pyproject.toml
	@echo "installing the pipeline extra into $(VENV): pyspark, pyarrow, pandas, jinja2, plotly (Java 17 needed to run it)"
	$(PY) -m pip install -q -e '.[pipeline]'
	touch $@

install: $(VENV)/.installed

$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install-pipeline: $(VENV)/.installed-pipeline

install-test: $(VENV)/.installed-test

# kcat and chromium (Debian's packages) serve only slow tests (kcat's round trip, the report in
# a browser), so `make test` installs them and `make test-fast` does not.
test-tools:
	@command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || \
	  { (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null 2>&1 || \
	    echo "kcat could not be installed; its tests will be skipped"; }
	@command -v chromium >/dev/null 2>&1 || \
	  { (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	    echo "chromium could not be installed; the report's browser test will be skipped"; }

## Start the server on 127.0.0.1:9092 with its data in ./data (HOST, PORT, DATA to change them).
run: install
	@pid=$$(cat $(PIDFILE) 2>/dev/null); \
	if [ -n "$$pid" ] && grep -qa coordinator /proc/$$pid/cmdline 2>/dev/null; then \
	  echo "a server started by make run is already running on port $(PORT) (make stop)"; exit 2; fi
	@$(PY) -m compileall -q coordinator protocol >/dev/null  # bytecode once, not at every start
	@echo $$$$ > $(PIDFILE); exec $(PY) -m coordinator --host $(HOST) --port $(PORT) --data-dir $(DATA)

## Stop the server `make run` started on PORT (SIGTERM: in-flight requests finish, logs fsynced).
stop:
	@pid=$$(cat $(PIDFILE) 2>/dev/null); \
	if [ -n "$$pid" ] && grep -qa coordinator /proc/$$pid/cmdline 2>/dev/null; then \
	  kill $$pid; while kill -0 $$pid 2>/dev/null; do sleep 0.1; done; echo "stopped the server on port $(PORT)"; \
	else echo "no server started by make run on port $(PORT)"; fi; rm -f $(PIDFILE)

## Delete the data dir (DATA) and the pipeline's ./out; refused while `make run`'s server runs.
reset-data:
	@pid=$$(cat $(PIDFILE) 2>/dev/null); \
	if [ -n "$$pid" ] && grep -qa coordinator /proc/$$pid/cmdline 2>/dev/null; then \
	  echo "the server on port $(PORT) is running: make stop first"; exit 1; fi
	rm -rf $(DATA) ./out

# The Java, Go and JavaScript reference clients (tests/clients/): built when their sources change.
# Maven, Go and npm fetch their dependencies from Maven Central, the Go module proxy and the npm
# registry the first time; Maven runs offline once it has. Without mvn, go or node/npm their
# tests are skipped.
JAVA_CLIENTS := tests/clients/java
JAVA_JAR     := $(JAVA_CLIENTS)/target/kcoord-java-clients-1.jar
GO_CLIENTS   := tests/clients/go
GO_BIN       := $(GO_CLIENTS)/build/kclients
JS_CLIENTS   := tests/clients/js
JS_MODULES   := $(JS_CLIENTS)/node_modules/.package-lock.json

$(JAVA_JAR): $(JAVA_CLIENTS)/pom.xml $(shell find $(JAVA_CLIENTS)/src -name '*.java')
	@if ! command -v mvn >/dev/null 2>&1; then echo "mvn not installed: the Java client tests will be skipped"; \
	elif [ -f $(JAVA_CLIENTS)/target/.fetched ]; then cd $(JAVA_CLIENTS) && mvn -q -B -o package; \
	else cd $(JAVA_CLIENTS) && mvn -q -B package && touch target/.fetched; fi

$(GO_BIN): $(GO_CLIENTS)/go.mod $(GO_CLIENTS)/go.sum $(wildcard $(GO_CLIENTS)/*.go)
	@if ! command -v go >/dev/null 2>&1; then echo "go not installed: the Go client tests will be skipped"; \
	else cd $(GO_CLIENTS) && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o build/kclients .; fi

# npm ci installs exactly package-lock.json's versions (node_modules/.package-lock.json is its
# record of them, newer than the lock file once installed).
$(JS_MODULES): $(JS_CLIENTS)/package.json $(JS_CLIENTS)/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "node/npm not installed: the JavaScript client tests will be skipped"; \
	else cd $(JS_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error; fi

# Apache Kafka 4.4 itself, the differential suite's oracle (tests/test_kafka_oracle.py): its
# broker and tools jars in tests/oracle/target/lib, and our launcher that runs many tool
# invocations in one JVM. Maven fetches them the first time, offline after; without java or
# mvn the suite is skipped and says why.
ORACLE     := tests/oracle
ORACLE_JAR := $(ORACLE)/target/kcoord-kafka-oracle-1.jar

$(ORACLE_JAR): $(ORACLE)/pom.xml $(shell find $(ORACLE)/src -type f)
	@if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then \
	  echo "java or mvn not installed: the Kafka 4.4 differential suite will be skipped"; \
	elif [ -f $(ORACLE)/target/.fetched ]; then cd $(ORACLE) && mvn -q -B -o package; \
	else cd $(ORACLE) && mvn -q -B package && touch target/.fetched; fi

oracle: $(ORACLE_JAR)

java-clients: $(JAVA_JAR)
go-clients: $(GO_BIN)
js-clients: $(JS_MODULES)
clients: java-clients go-clients js-clients

## ruff over the tree and mypy over protocol/, coordinator/ and pipeline/ (settings in pyproject.toml;
## the pipeline extra is installed for pyspark's types).
lint: $(VENV)/.installed-dev $(VENV)/.installed-pipeline
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

## The suite without the tests marked slow (pytest -m "not slow"): a few minutes on 2 cores.
test-fast: install-test
	@$(PY) -m compileall -q coordinator protocol pipeline >/dev/null  # (see `test`)
	$(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadfile -m "not slow" --durations=15

## The compiled build again, in place (protocol/_compiled/), after a change to one of the modules
## protocol/compiled.py lists (`make install` compiled them; older than its source, the build is
## not used: the Python runs): mypyc from the dev extra. `make clean` removes it.
COMPILED := $(shell sed -n 's/^    "\([a-z_/]*\.py\)",$$/\1/p' protocol/compiled.py)
compiled: protocol/_compiled/manifest.json
protocol/_compiled/manifest.json: $(VENV)/.installed-dev setup.py $(COMPILED)
	$(PY) setup.py -q build_ext --inplace

## The pure-Python fallback's core tests (KCOORD_PURE=1: the compiled build, if any, unused): the
## in-process tests of the compiled modules' paths, a minute or so; CI runs them after `make test`.
PURE_TESTS ?= tests/test_runtime_contract.py tests/test_groups_wire.py tests/test_offset_commit_codec.py \
	tests/test_log_offsets.py tests/test_offsets_durability.py tests/test_compiled_build.py
test-pure: install-test
	KCOORD_PURE=1 $(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadfile $(PURE_TESTS)

## Install what the tests need (clients, pyspark, kcat, chromium) and run the whole suite.
# Bytecode written once first: the suite starts a few hundred interpreters (servers, kcoord,
# clusters' brokers), each of which would otherwise compile the package again where
# PYTHONDONTWRITEBYTECODE is set (a third of a second of CPU each).
test: install-test install-pipeline test-tools clients oracle
	@$(PY) -m compileall -q coordinator protocol pipeline >/dev/null
	$(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadfile --durations=15

bench: install-test install-pipeline
	$(PY) -m pip install -q -e '.[bench]'
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
	$(PY) -m bench.report

## Regenerate docs/benchmarks.md from the results the bench scripts wrote to bench/results/.
bench-report: install
	$(PY) -m bench.report

report: install-pipeline
	$(PY) -m pipeline.run --data-dir $(DATA) --out ./out

clean:
	rm -rf $(VENV) .pytest_cache build protocol/_compiled
