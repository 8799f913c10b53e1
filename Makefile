# Fixpoint's entry points. Each one is self-sufficient on a fresh Debian 12 machine with python3.11
# (venv), gcc, g++, make, cmake and git: it creates .venv if missing and installs the project into it.
#   make demo   the main job: the shipped example end to end (examples/fashion/run_example.py): quantize,
#               evaluate, generate, build for qemu-m4, flash-verify, summary, HTML report in examples/fashion/out
#   make bench  conformance of the reference kernels, then the ds_cnn_s benchmark
#   make test   the static checks (make lint), the test suite (pytest), then the VS Code extension's
#               TypeScript unit tests (npm test)
#   make lint   ruff (lint and format), mypy --strict over quantcore and the language server, and the import
#               graph's contracts (lint-imports: quantcore's layers, no server import; [tool.importlinter])
#   make fuzz   the property-based tests, round after round with new seeds, for FUZZ_SECONDS
VECTORS ?= ../shared/cmsisnn-vectors
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Reinstalled only when pyproject.toml changes; the install is editable, so code edits need none.
INSTALLED := $(VENV)/.fixpoint-installed
# The extension's node modules (npm registry only), reinstalled only when its package-lock.json changes.
EXT := vscode-extension
EXT_INSTALLED := $(EXT)/node_modules/.package-lock.json

.PHONY: demo bench test lint fuzz install

install: $(INSTALLED) $(EXT_INSTALLED)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch,tflm]'
	@touch $@

$(EXT_INSTALLED): $(EXT)/package-lock.json
	cd $(EXT) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# Without CMSIS-NN or the Arm toolchain + QEMU the example skips its build and verification steps, says
# which command gets them, and still runs (and exits 0 with) the host steps.
demo: $(INSTALLED)
	$(BIN)/python examples/fashion/run_example.py

bench: $(INSTALLED)
	@echo "== 1/2 conformance: the numpy reference kernels against CMSIS-NN's test vectors in $(VECTORS)"
	$(BIN)/fixpoint conformance --vectors $(VECTORS)
	@echo
	@echo "== 2/2 benchmark: reference executor vs compiled CMSIS-NN (host) on ds_cnn_s, 1000 random inputs"
	@echo "   (the CMSIS-NN side needs a checkout; see 'fixpoint cmsis-nn status')"
	$(BIN)/python bench/ds_cnn_s.py --vectors $(VECTORS)

# The extension's `npm test`: its build (schema copy, rules from the server via FIXPOINT_PYTHON, tsc
# --noEmit, esbuild) and its unit tests (node --test). The tests inside VS Code are .ci/vscode-extension.sh.
test: lint $(EXT_INSTALLED)
	$(BIN)/pytest
	cd $(EXT) && FIXPOINT_PYTHON=$(abspath $(BIN)/python) npm test --silent

# mypy's file list in pyproject.toml is the whole of quantcore and the server: nothing falls out of it.
# lint-imports checks the layers and contracts of pyproject.toml's [tool.importlinter] (README, Layout).
lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Every property-based test (hypothesis, marked `fuzz`) with FUZZ_EXAMPLES examples each, one round per
# seed (1, 2, ...), until FUZZ_SECONDS have passed (the round under way finishes). A failure stops it;
# hypothesis prints the failing example and its seed reproduces it.
FUZZ_SECONDS ?= 600
FUZZ_EXAMPLES ?= 300
fuzz: $(INSTALLED)
	@end=$$(( $$(date +%s) + $(FUZZ_SECONDS) )); seed=0; \
	while [ $$(date +%s) -lt $$end ]; do \
	  seed=$$((seed + 1)); \
	  echo "== fuzz round $$seed: $(FUZZ_EXAMPLES) examples per property test, seed $$seed"; \
	  FIXPOINT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q -m fuzz -p no:cacheprovider \
	    --hypothesis-seed=$$seed || exit 1; \
	done
