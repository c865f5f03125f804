# Every target builds what it needs from scratch: a fresh clone runs `make test` alone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export XLA_FLAGS := --xla_force_host_platform_device_count=8
export KERAS_BACKEND := jax
export JAX_PLATFORMS := cpu

.PHONY: venv demo test lint-plans lint-imports fuzz bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps 'keras-hub>=0.22'
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(VENV)/bin/planc lint plans/*.kd
	$(VENV)/bin/planc explain plans/gemma.kd --model plans/models/gemma_2b.json -D tp=2 --devices 8

lint-plans: venv
	$(VENV)/bin/planc lint --strict plans/*.kd
	$(VENV)/bin/planc fmt --check plans/*.kd

# The import contracts in pyproject.toml: the pipeline's layers, no circles, no jax or
# keras in the front end. A broken one prints the offending import and its line.
lint-imports: venv
	$(VENV)/bin/lint-imports

test: venv lint-plans lint-imports
	$(PY) -m pytest -q

fuzz: venv
	$(PY) tests/fuzzing.py --cases 100000

bench: venv
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
