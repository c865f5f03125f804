# Every target builds what it needs from scratch: a fresh clone runs `make test` alone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CORE   := $(VENV)/.core
STAMP  := $(VENV)/.installed

export XLA_FLAGS := --xla_force_host_platform_device_count=8
export KERAS_BACKEND := jax
export JAX_PLATFORMS := cpu

.PHONY: venv core parser demo docs test test-oldest test-newest lint-plans lint-imports fuzz bench clean

# Each step says what it does in a line of its own ("make: ..."), then runs.
$(PY):
	@echo "make: creating the virtual environment $(VENV) (with $(PYTHON), pip upgraded)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# planc and its core dependencies (pyproject.toml's `dependencies`: lark, rich, numpy,
# google-re2, interegular, jax): all `make demo` runs, ~0.6 GB. pip says what it fetches.
$(CORE): pyproject.toml | $(PY)
	@echo "make: installing planc (editable) and its core dependencies into $(VENV)"
	$(PY) -m pip install -e .
	touch $@

core: $(CORE)

# Everything the tests drive, on top of the core (~2.6 GB; pip kept quiet: hundreds of
# lines). The docs extra: tests/docs/test_readme.py builds the documentation site. The `tpu` extra
# (libtpu) lets the tests compile for real TPU topologies, compile-only. The `flax` and
# `maxtext` extras: the tests of logical axis names run real Flax models and read MaxText
# configs (not in `test`: Flax needs a newer jax than the oldest venv's).
$(STAMP): pyproject.toml | $(CORE)
	@echo "make: installing the extras the tests drive (test, docs, tpu, flax, maxtext; CPU torch) into $(VENV): a few minutes"
	$(PY) -m pip install --quiet -e '.[test,docs,tpu,flax,maxtext]'
	@echo "make: installing keras-hub (without its TensorFlow requirements)"
	$(PY) -m pip install --quiet --no-deps 'keras-hub>=0.22'
	touch $(STAMP)

# The parse tables of grammar/planc.lark as plain data, and lark's standalone parser of it
# (both gitignored: the second is lark's code, see planc/syntax/generate_parser.py). The
# tool rewrites them only when the grammar or lark's version changed, so it runs on every
# `make venv`; without them planc parses with lark.
parser: $(CORE)
	@echo "make: generating the parser modules from grammar/planc.lark (when it changed)"
	$(PY) -m planc.syntax.generate_parser

venv: $(STAMP) parser

# The core alone: the demo lints plans and explains one against a model's shapes.
demo: core parser
	@echo "make: planc lint: every plan in plans/ checked"
	$(VENV)/bin/planc lint plans/*.kd
	@echo "make: planc explain: the Gemma plan on Gemma 2B's shapes, at 8 devices"
	$(VENV)/bin/planc explain plans/gemma.kd --model plans/models/gemma_2b.json -D tp=2 --devices 8
	@echo "make: done. planc is in $(VENV)/bin: run '. $(VENV)/bin/activate' for 'planc' on your PATH, or call $(VENV)/bin/planc. Other commands need extras (README, Install); 'make venv' installs them all."

# The documentation site, into site/ (gitignored): `--strict` fails on a broken link or
# anchor, a page missing from the nav, any warning. It runs offline: mkdocs.yml turns off
# the theme's web fonts and every plugin that fetches. NO_MKDOCS_2_WARNING quiets
# material's banner about a future MkDocs.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint-plans: venv
	$(VENV)/bin/planc lint --strict plans/*.kd
	$(VENV)/bin/planc fmt --check plans/*.kd

# The import contracts in pyproject.toml: the pipeline's layers, no circles, no jax,
# keras or torch in the front end. A broken one prints the offending import and its line.
lint-imports: venv
	$(VENV)/bin/lint-imports

# VS Code's own TextMate engine (vscode-textmate, vscode-oniguruma) for
# tests/editors/test_textmate.py, and the extension's client library; node and npm from apt
# when missing. No lock file: it would name the registry's host.
VSCODE := editors/vscode
$(VSCODE)/node_modules/.installed: $(VSCODE)/package.json
	( (command -v npm >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm)) && \
	  npm install --prefix $(VSCODE) --no-audit --no-fund --no-package-lock --silent && \
	  touch $@ ) || \
		echo "node or the npm packages could not be installed: tests/editors/test_textmate.py's VS Code engine test will skip"

# Open MPI's mpirun for tests/multihost/test_mpirun.py (2 processes on loopback); from apt
# when missing. Where apt cannot install it the test skips, saying so in one line.
MPIRUN := /usr/bin/mpirun
$(MPIRUN):
	command -v mpirun >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin) || \
		echo "openmpi-bin could not be installed: tests/multihost/test_mpirun.py will skip"

# Slurm's controller and node daemons and its client commands for the `slurm` tests
# (tests/multihost/test_srun*.py start a one-node Slurm of their own: no munge, no
# cgroups); from apt when missing. Where apt cannot install them those tests skip,
# saying so in one line.
SLURMD := /usr/sbin/slurmd
$(SLURMD):
	command -v slurmd >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		slurmctld slurmd slurm-client) || \
		echo "Slurm could not be installed: the slurm tests (pytest -m slurm) will skip"

# git for tests/integrations/test_precommit.py (`pre-commit try-repo` clones the working tree).
GIT := /usr/bin/git
$(GIT):
	command -v git >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git)

# Debian's chromium for tests/integrations/test_html_browser.py (headless, over the DevTools
# protocol); from apt when missing. Where apt cannot install it the test skips, saying so.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	command -v chromium >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) || \
		echo "chromium could not be installed: tests/integrations/test_html_browser.py will skip"

test: venv lint-plans lint-imports $(VSCODE)/node_modules/.installed $(MPIRUN) $(SLURMD) $(GIT) $(CHROMIUM)
	$(PY) -m pytest -q

# The oldest versions planc supports (pyproject.toml), in their own venv: the JAX-facing
# tests only, so it stays a few minutes.
OLDEST_VENV := .venv-oldest
OLDEST_PY   := $(OLDEST_VENV)/bin/python
OLDEST      := jax==0.7.1 jaxlib==0.7.1 keras==3.11.0
OLDEST_TESTS := tests/targets/jax/test_jax_versions.py tests/check/test_axis_types.py \
	tests/targets/jax/test_constrain.py tests/targets/jax/test_train_explicit.py \
	tests/targets/jax/test_jax_target.py tests/targets/emit/test_compile.py \
	tests/targets/jax/test_train_zero1.py tests/targets/aot/test_aot_state.py

$(OLDEST_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_PY) -m pip install --quiet --upgrade pip
	$(OLDEST_PY) -m pip install --quiet -e '.[test]' $(OLDEST)
	touch $@

test-oldest: $(OLDEST_VENV)/.installed
	PLANC_EXPECT_JAX=0.7.1 $(OLDEST_PY) -m pytest -q $(OLDEST_TESTS)

# The newest jax and keras, on the newest Python the OS package manager offers (jax 0.11
# and later need Python >= 3.12, which `make test` may not have): the same JAX-facing
# tests, in .venv-newest. Where no such Python can be had (Debian 12: 3.11 only), one line
# says so and it passes. See .ci/test-newest.
NEWEST_VENV := .venv-newest

test-newest:
	@.ci/test-newest $(NEWEST_VENV) $(OLDEST_TESTS)

fuzz: venv
	$(PY) tests/fuzzing.py --cases 100000

bench: venv
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(NEWEST_VENV) build site *.egg-info planc/syntax/_lalr_standalone.py
