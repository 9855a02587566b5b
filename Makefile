# The README's two commands: `make serve` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# one stamp per extra installed: serve's for `make serve`, dev's (every extra and the test tools) for the rest
STAMP = $(VENV)/.installed-$(1)
# the Lambda platform the layer's lock is resolved for (stacks/packaging.py)
LAMBDA_PLATFORM := --python-version 3.12 --python-platform aarch64-manylinux_2_28 --only-binary :all:
# what the Lambda Python runtime has: a copy in the layer would shadow it
LAMBDA_PROVIDED := boto3 botocore s3transfer jmespath python-dateutil six urllib3
# the CDK's jsii runtime runs on the machine's Node 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: serve test services lint typecheck pytest synth layer-lock openapi clean

# setuptools says "Editable installation. Please be careful with folders in your working directory
# with the same name as your package" on every editable install of a flat layout like this one, and
# pip forwards it as a BuildBackendWarning; the filter matches that message only
$(VENV)/.installed-%: pyproject.toml
	@echo "Setting up $(VENV) with the $* extra (once; a minute or two) ..."
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install -e '.[$*]'
	touch $@

# `make serve PORT=9000 HOST=0.0.0.0 DATA_DIR=other-data`: blackbox serve's --port, --host and --data-dir
# (default 127.0.0.1:8080, ./blackbox-data; a second serve needs both its own port and data directory).
# Only from make's command line: shells export HOST (tcsh: this machine's name) and PORT for their own uses
option = $(if $(filter command line,$(origin $(1))), $(2) '$($(1))')
# the stack walker minidump processing runs, where cargo can build it (without it, uploads are
# taken and their minidumps wait, `pending`, for a serve that has it)
serve: $(call STAMP,serve) $(if $(shell command -v cargo),.tools/bin/blackbox-stackwalk)
	$(BIN)/blackbox serve$(call option,PORT,--port)$(call option,HOST,--host)$(call option,DATA_DIR,--data-dir)

test: lint typecheck services pytest

# Kafka, MariaDB and CouchbaseMock for the `services` profile and its tests (installed when missing)
services:
	scripts/services start

# lint-imports: the layers and the cycles of pyproject.toml's [tool.importlinter]
lint: $(call STAMP,dev)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(call STAMP,dev)
	$(BIN)/mypy

# the AWS CDK CLI (`npx cdk synth`, `npx cdk deploy`), pinned by package-lock.json
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# rust-minidump's stack walker for adapters/stackwalk.py (stackwalk/; half a minute on 2 cores)
.tools/bin/blackbox-stackwalk: stackwalk/Cargo.toml stackwalk/Cargo.lock stackwalk/src/main.rs
	@echo "building the minidump stack walker (rust-minidump) with cargo: about 40 s, once"
	cargo install --locked --force --root .tools --target-dir .tools/target --path stackwalk
	touch $@

# the walker again for the Lambda functions (stacks/packaging.py's layer): arm64 and no glibc newer than
# Amazon Linux 2023's 2.34, cross-built without Docker by cargo-zigbuild with the dev extra's ziglang as
# C compiler and linker. It runs `python3 -m ziglang` with the PATH's python3 unless told ours
LAMBDA_TARGET := aarch64-unknown-linux-gnu
LAMBDA_GLIBC := 2.34
ZIGBUILD_VERSION := 0.24.1
LAMBDA_WALKER := .tools/lambda/stackwalk/bin/blackbox-stackwalk

.tools/cargo-zigbuild-$(ZIGBUILD_VERSION):
	cargo install --quiet --locked --force --root .tools --target-dir .tools/target --version $(ZIGBUILD_VERSION) cargo-zigbuild
	touch $@

$(LAMBDA_WALKER): stackwalk/Cargo.toml stackwalk/Cargo.lock stackwalk/src/main.rs .tools/cargo-zigbuild-$(ZIGBUILD_VERSION) | $(call STAMP,dev)
	rustup target add $(LAMBDA_TARGET)
	CARGO_ZIGBUILD_PYTHON_PATH=$(abspath $(BIN)/python) .tools/bin/cargo-zigbuild zigbuild --quiet --locked --release \
	  --manifest-path stackwalk/Cargo.toml --target-dir .tools/target --target $(LAMBDA_TARGET).$(LAMBDA_GLIBC)
	install -D .tools/target/$(LAMBDA_TARGET)/release/blackbox-stackwalk $@

# the walker layer's test bundles it (tests/infrastructure/test_walker_layer.py); the README's test
# runs `make serve`, whose stamp is made here, not by pip in the venv the other process is using. Two
# processes (a test file each, so a module's serve starts once): most of the suite waits on serves and
# engines. Files go in the order collected, the contract and end-to-end ones first (xdist's default,
# the files of most tests first, left them to the end, one process working alone; its option for the
# order came in pytest-xdist 3.8). The tests that stop an engine run after, alone
pytest: $(call STAMP,dev) $(call STAMP,serve) node_modules/.installed .tools/bin/blackbox-stackwalk $(LAMBDA_WALKER)
	$(BIN)/pytest --numprocesses 2 --dist loadfile --no-loadscope-reorder -m "not outage"
	$(BIN)/pytest -m outage

synth: $(call STAMP,dev) node_modules/.installed
	npx cdk synth --quiet

# the Lambda layer's lock: pyproject.toml's dependencies (the runtime set, no extras) with every
# file's hash, for the functions' platform; run it after changing them (tests/infrastructure/test_layer.py
# fails until then)
layer-lock: $(call STAMP,dev)
	$(BIN)/uv pip compile pyproject.toml --quiet -o stacks/layer/requirements.txt --generate-hashes \
	  $(LAMBDA_PLATFORM) $(addprefix --no-emit-package ,$(LAMBDA_PROVIDED))

# the API's OpenAPI document, generated from the handlers; run it after changing a route
# (tests/unit/test_contract_drift.py fails until then)
openapi: $(call STAMP,dev)
	$(BIN)/blackbox openapi --output api/openapi.yaml

clean:
	-scripts/services stop
	rm -rf $(VENV) node_modules cdk.out blackbox-data .services .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
