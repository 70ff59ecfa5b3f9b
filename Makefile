# The two commands of the README. Both set up everything they need in .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= nodemanager:$(VERSION)

.PHONY: run test unit controlplane lint bench image clean

# constraints.txt pins every dependency, so each install is the same and resolves at once
# with the pip that Python ships.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test,bench,plot]'
	touch $(STAMP)

run: $(STAMP)  ## start the service on the embedded default (simulated cloud and cluster)
	$(BIN)/nodemanager run

test: $(STAMP) controlplane  ## lint, check layers, run the whole test suite, the real control plane included
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2 -q

unit: $(STAMP)  ## the quick suite: everything but the tests against the real control plane
	$(BIN)/pytest -n 2 -q -m "not e2e"

# etcd, kwok, and kube-apiserver, kube-controller-manager, kube-scheduler of Kubernetes 1.32 and
# 1.37, built from the pinned Go modules in tests/e2e/controlplane into ~/.cache/nodemanager
# (about 15 minutes on 2 cores the first time; nothing is built again while cached).
controlplane:
	@command -v go >/dev/null || { echo "error: the end-to-end tests build a Kubernetes control plane and need Go (1.24 or newer) on PATH" >&2; exit 2; }
	bash tests/e2e/controlplane/build.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/scaler.py --workload mixed --pods 20000 --json

image:  ## build the container image (needs a Docker engine): make image IMAGE=<registry>/nodemanager:<tag>
	docker build -f deploy/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
