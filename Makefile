# The three commands a newcomer needs: `make run`, `make test`, and `make setup` (which both call).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup run test lint typecheck contracts pytest clean

setup: $(STAMP)

# Idempotent: rebuilt only when the venv is missing or pyproject.toml changed.
# torch goes in first: the CPU build (2.13.0) on a machine without a CUDA torch, so that nothing
# later pulls a multi-GB CUDA build from the index.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null; then \
	  echo "keeping the CUDA torch already in $(VENV)"; \
	else \
	  $(PY) -m pip install -q torch==2.13.0; \
	fi
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# The TUI on the bundled example: the offline generator (no key needed), on the CPU when there is no
# GPU. Without a terminal (a pipe, CI) the same session runs headless.
run: setup
	@if [ -t 0 ] && [ -t 1 ]; then \
	  $(VENV)/bin/kernel-code optimize softmax_fp32 --iterations 5; \
	else \
	  $(VENV)/bin/kernel-code optimize softmax_fp32 --iterations 5 --headless; \
	fi

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: setup
	$(VENV)/bin/mypy

contracts: setup
	$(VENV)/bin/lint-imports

pytest: setup
	$(PY) -m pytest -q

test: lint typecheck contracts pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
