# Two commands matter: `make run` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# make run HOST=0.0.0.0 PORT=9093 DATA=/tmp/kafka; KCOORD_* variables are honoured too.
HOST   ?= $(or $(KCOORD_HOST),127.0.0.1)
PORT   ?= $(or $(KCOORD_PORT),9092)
DATA   ?= $(or $(KCOORD_DATA_DIR),./data)

.PHONY: run test install install-test bench report clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,pipeline]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test
	@command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || \
	  { (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null 2>&1 || \
	    echo "kcat could not be installed; its tests will be skipped"; }
	@command -v chromium >/dev/null 2>&1 || \
	  { (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	    echo "chromium could not be installed; the report's browser test will be skipped"; }

## Start the server on 127.0.0.1:9092 with its data in ./data (HOST, PORT, DATA to change them).
run: install
	@$(PY) -m compileall -q coordinator protocol >/dev/null  # bytecode once, not at every start
	$(PY) -m coordinator --host $(HOST) --port $(PORT) --data-dir $(DATA)

## Install what the tests need (clients, pyspark, kcat, chromium) and run the whole suite.
test: install-test
	$(PY) -m pytest -q -p no:cacheprovider

bench: install-test
	$(PY) -m pip install -q -e '.[bench]'
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

report: install-test
	$(PY) -m pipeline.run --data-dir $(DATA) --out ./out

clean:
	rm -rf $(VENV) .pytest_cache
