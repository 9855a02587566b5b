# The README's two commands: `make serve` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the CDK's jsii runtime runs on the machine's Node 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: serve test services lint typecheck pytest synth clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/blackbox serve

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
