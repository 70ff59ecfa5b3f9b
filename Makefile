# The two commands of the README (make run, make test), and the docs site. Both set up everything they need in .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= nodemanager:$(VERSION)

.PHONY: run test unit docs manifests controlplane browser lint bench image clean

# constraints.txt pins every dependency, so each install is the same and resolves at once
# with the pip that Python ships. `run` needs only the runtime; the rest (tests, benchmarks,
# plots, docs, Ray for corpus sweeps) comes with `test`.
$(RUNTIME): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test,plot,docs,sweep]'
	touch $(STAMP)

run: $(RUNTIME)  ## start the service on the embedded default (simulated cloud and cluster)
	$(BIN)/nodemanager run

test: $(STAMP) controlplane browser docs  ## lint, check layers, build the docs, run the whole test suite, the real control plane included
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -n 3 --dist worksteal -q  # three workers on two cores: one of them waits through the slow idle test

docs: $(STAMP)  ## the docs site, into build/site; a broken link or anchor fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # not --quiet: it hides the warnings strict counts

unit: $(STAMP)  ## the quick suite: everything but the tests against the real control plane
	$(BIN)/pytest -n 2 -q -m "not e2e"

manifests: $(STAMP) controlplane  ## render deploy/kubernetes (plain manifests) from the Helm chart after changing it
	$(BIN)/python deploy/helm/render.py "$$(cd tests/e2e && ../../$(BIN)/python -c 'from controlplane import binaries; print(binaries()["helm"])')"

# Debian's chromium and its chromedriver, for the status page's browser test (as root, or with sudo).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver; }

# etcd, kwok, helm, and kube-apiserver, kube-controller-manager, kube-scheduler of Kubernetes 1.32 and
# 1.37, built from the pinned Go modules in tests/e2e/controlplane into ~/.cache/nodemanager
# (about 25 minutes on 2 cores the first time; nothing is built again while cached).
controlplane:
	@command -v go >/dev/null || { echo "error: the end-to-end tests build a Kubernetes control plane and need Go (1.26 or newer) on PATH" >&2; exit 2; }
	bash tests/e2e/controlplane/build.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/scaler.py --workload mixed --pods 20000 --json

image:  ## build the container image (needs a Docker engine): make image IMAGE=<registry>/nodemanager:<tag>
	docker build -f deploy/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
