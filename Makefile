# The README's two commands: `make serve` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the CDK's jsii runtime runs on the machine's Node 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: serve test services lint typecheck pytest synth clean

# setuptools says "Editable installation. Please be careful with folders in your working directory
# with the same name as your package" on every editable install of a flat layout like this one, and
# pip forwards it as a BuildBackendWarning; the filter matches that message only
$(STAMP): pyproject.toml
	@echo "Setting up $(VENV): the API's and the tests' Python packages (once; a minute or two) ..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

# `make serve PORT=9000 HOST=0.0.0.0`: blackbox serve's --port and --host (default 127.0.0.1:8080).
# Only from make's command line: shells export HOST (tcsh: this machine's name) and PORT for their own uses
option = $(if $(filter command line,$(origin $(1))), $(2) $($(1)))
serve: $(STAMP)
	$(BIN)/blackbox serve$(call option,PORT,--port)$(call option,HOST,--host)

test: lint typecheck services pytest

# Kafka, MariaDB and CouchbaseMock for the `services` profile and its tests (installed when missing)
services:
	scripts/services start

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# the AWS CDK CLI (`npx cdk synth`, `npx cdk deploy`), pinned by package-lock.json
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

pytest: $(STAMP) node_modules/.installed
	$(BIN)/pytest

synth: $(STAMP) node_modules/.installed
	npx cdk synth --quiet

clean:
	-scripts/services stop
	rm -rf $(VENV) node_modules cdk.out blackbox-data .services .pytest_cache .mypy_cache .ruff_cache
