# ASAP: `make demo` runs the main job on the bundled examples; `make test` runs every test.
# Both set up what they need (project venv, node_modules, Debian packages for the editor test)
# and are idempotent.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXT := extension
EXT_STAMP := $(EXT)/node_modules/.installed-stamp
EXT_BUNDLE := $(EXT)/dist/extension.js
# MaxText's own environment (`make maxtext-env`): the tests marked for it compile MaxText's train step there, and
# bench/memory_vs_compiler.py compares with that program. Python 3.12 (pyenv's 3.12.1 where the machine has it) and
# maxtext[tpu]: about 7 minutes and 2.8 GB, so `make test` never builds it; it only uses it when it is there.
# MAXTEXT_VENV=PATH names another environment (`make maxtext-env MAXTEXT_VENV=PATH` adopts an existing one: pip finds
# the pinned version installed and the stamp is written).
MAXTEXT_VENV ?= .venv-maxtext
MAXTEXT_VERSION := 0.2.5
MAXTEXT_BASE_PYTHON ?= $(or $(wildcard $(HOME)/.pyenv/versions/3.12.1/bin/python),python3.12)
MAXTEXT_STAMP := $(MAXTEXT_VENV)/.installed-stamp-$(MAXTEXT_VERSION)
# what `make test` hands pytest: the environment's Python once installed (a value already in the shell wins)
MAXTEXT_TEST_PYTHON := $(if $(wildcard $(MAXTEXT_STAMP)),$(abspath $(MAXTEXT_VENV))/bin/python)

.PHONY: demo test lint typecheck pytest vitest e2e vsix venv ext bench clean sysdeps maxtext-env screenshots

venv: $(STAMP)
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,compile,team]'
	touch $@

maxtext-env: $(MAXTEXT_STAMP)
$(MAXTEXT_STAMP):
	test -x $(MAXTEXT_VENV)/bin/python || $(MAXTEXT_BASE_PYTHON) -m venv $(MAXTEXT_VENV)
	$(MAXTEXT_VENV)/bin/python -m pip install -q --disable-pip-version-check 'maxtext[tpu]==$(MAXTEXT_VERSION)'
	touch $@

ext: $(EXT_BUNDLE)
$(EXT_STAMP): $(EXT)/package.json $(EXT)/package-lock.json
	npm --prefix $(EXT) ci --no-audit --no-fund --loglevel=error
	touch $@
$(EXT_BUNDLE): $(EXT_STAMP) $(wildcard $(EXT)/src/*.ts $(EXT)/src/webview/*.ts) $(EXT)/tsconfig.json
	npm --prefix $(EXT) run --silent build

demo: $(STAMP)
	@echo "== ASAP's analysis of Llama3-8B on v6e-16 (fsdp 4 x tensor 4): diagnosis and proposed meshes (offline engine)"
	$(VENV)/bin/asap analyze examples/llama3-8b-v6e-16.yml
	@echo
	@echo "== A correct config: Llama2-7B, FSDP over a v5e-256 slice"
	$(VENV)/bin/asap check examples/llama2-7b-v5e-256.yml
	@echo
	@echo "== Its estimate on the slice: memory, collectives, step time, MFU, bottleneck"
	$(VENV)/bin/asap estimate examples/llama2-7b-v5e-256.yml
	@echo
	@echo "== The same model with 16-way tensor parallelism instead (what-if, without editing the file)"
	$(VENV)/bin/asap estimate examples/llama2-7b-v5e-256.yml --mesh ici_fsdp_parallelism=16,ici_tensor_parallelism=16 | tail -4
	@echo
	@echo "== Llama3-8B on v6e-16 with 4-way tensor parallelism, and the fastest valid meshes of that slice"
	$(VENV)/bin/asap estimate examples/llama3-8b-v6e-16.yml --top 3 | tail -5
	@echo
	@echo "== A config whose mesh does not fit its slice (asap exits 1 on errors)"
	$(VENV)/bin/asap check examples/bad-mesh-v5e-256.yml || test $$? -eq 1
	@echo
	@echo "== A launch file: an XPK script whose MaxText arguments and XLA flags live in variables (one result per run)"
	$(VENV)/bin/asap check examples/launch/xpk_llama3_8b_v6e_16.sh || test $$? -eq 1
	@echo
	@echo "== The same as JSON (for CI), findings only; the whole document is in .tmp/bad-mesh.json"
	@mkdir -p .tmp
	$(VENV)/bin/asap check examples/bad-mesh-v5e-256.yml --json > .tmp/bad-mesh.json || test $$? -eq 1
	$(PY) -c 'import json; print(json.dumps(json.load(open(".tmp/bad-mesh.json"))["findings"], indent=1))'

lint: $(STAMP)
	$(VENV)/bin/ruff check server tests bench tools
	$(VENV)/bin/ruff format --check server tests bench tools
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The team tests start a real PostgreSQL server (initdb in a temp dir): install Debian's package when the machine
# lacks it. Ray and the GCS emulator come with the venv (the team and dev extras).
sysdeps:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  [ "$$(id -u)" = 0 ] || { echo "PostgreSQL missing; install it as root (apt-get install postgresql)" >&2; exit 1; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }

# ASAP_REQUIRE_SERVERS=1: a test whose server cannot start fails instead of skipping (tests/support/servers.py).
# ASAP_MAXTEXT_PYTHON: the tests marked for MaxText's environment run where `make maxtext-env` installed it.
# PYTEST_WORKERS processes (pytest-xdist), a test file to each (tests/conftest.py): some tests wait on a server or a
# subprocess, so a third process fills the 2 cores (on a shared 2-core machine: 371 s with 3, 391 s with 4, 603 s in
# one process); PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= 3
pytest: $(STAMP) sysdeps
	ASAP_REQUIRE_SERVERS=1 $(if $(MAXTEXT_TEST_PYTHON),ASAP_MAXTEXT_PYTHON="$${ASAP_MAXTEXT_PYTHON:-$(MAXTEXT_TEST_PYTHON)}") \
	  $(PY) -m pytest -q -rs $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS))

vitest: $(EXT_STAMP)
	npm --prefix $(EXT) test --silent

e2e: $(STAMP) $(EXT_BUNDLE)
	bash tests/e2e/run.sh
	bash tests/nvim/run.sh

# The stages one after another, each one's wall time printed at the end (tools/stages.py); the first that fails
# stops the run with its status. lint, typecheck and vitest are one stage of three concurrent makes (short, and
# vitest mostly waits on a real pip install); the e2e scenarios overlap inside run.sh.
test: $(STAMP)
	MAKE="$(MAKE)" $(PY) tools/stages.py lint+typecheck+vitest pytest e2e

# The README's pictures: the real-editor scenario (tests/e2e/run.sh) takes its screenshots in .tmp/e2e/; these are
# copied to docs/images/ (committed, 1400 x 900 PNG, about 150 KB each).
SCREENSHOTS := hover fixed agent-hover roofline verify-withdrawn launch-hover install-progress
screenshots: $(STAMP) $(EXT_BUNDLE)
	bash tests/e2e/run.sh
	mkdir -p docs/images
	for s in $(SCREENSHOTS); do cp .tmp/e2e/$$s.png docs/images/; done
	du -ch $(SCREENSHOTS:%=docs/images/%.png) | tail -1

# The wheel a user installs (dist/asap-*.whl): the knowledge notes and records, the catalogs, tables and migrations
# are package data (pyproject.toml). Built with the venv's setuptools, offline; tests/test_installed_wheel.py installs
# one into a fresh venv and runs it.
.PHONY: wheel
wheel: $(STAMP)
	rm -rf build dist/asap-*.whl  # setuptools packs whatever an old build left in build/lib
	$(PY) -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w dist .

# The VSIX (extension/asap-<version>.vsix, vsce's name from package.json) carries the server wheel of the same
# version in wheels/ (not server/: a directory of that name beside the extension would shadow the package `python -m
# server` imports where the server runs in the extension's directory), which *ASAP: Install Server* installs; its packaging (extension/scripts/prepackage.mjs) fails
# when pyproject.toml's and package.json's versions differ, and writes THIRD_PARTY_NOTICES.md from the bundles.
vsix: $(EXT_BUNDLE) wheel
	rm -f $(EXT)/wheels/asap-*.whl
	mkdir -p $(EXT)/wheels
	cp dist/asap-*-py3-none-any.whl $(EXT)/wheels/
	npm --prefix $(EXT) run --silent package

# The extension's icon: extension/images/icon.png (committed) rendered from icon.svg.
.PHONY: icon
icon: $(STAMP)
	$(PY) tools/render_icon.py

bench: $(STAMP)
	$(PY) bench/mfu_references.py
	$(PY) bench/enumerate.py
	$(PY) bench/lsp_latency.py
	$(PY) bench/profile_ingest.py

clean:
	rm -rf $(VENV) $(EXT)/node_modules $(EXT)/dist tests/e2e/node_modules .tmp build dist
