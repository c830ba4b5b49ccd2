# Two commands set everything up: `make run` and `make test`. Both create .venv and install on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run infra test lint typecheck browser clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m devstack run

infra: install
	$(PY) -m devstack infra

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install
	$(PY) -m mypy

# The browser test drives Debian's Chromium through Playwright; no browser is ever downloaded.
browser:
	@command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; }

test: install browser lint typecheck
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
