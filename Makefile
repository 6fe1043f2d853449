# Normalization, from Scratch: build the site and run every test.
#   make book   set everything up (first run only) and build the site into _build/html
#   make test   the same set-up and build, then every test
# `make help` lists the rest.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
PIP    := $(PY) -m pip --disable-pip-version-check
TORCH_PIN := torch==2.13.0
# torch comes from pip (uv does not look at this machine's local torch file, and without it a
# range would pull a CUDA build); everything else from uv, which installs requirements.txt in a
# third of pip's time (18 s against 57 s here, bytecode compiled). Its pin is requirements.txt's.
UV_PIN := $(filter uv==%,$(file < requirements.txt))
UV     := $(BIN)/uv
# The torch of the Colab-like kernel the notebooks are tested in: make test-colab TORCH=2.14.1
TORCH  ?= 2.13.0
COLAB_DIR ?= _build/colab-venv/torch-$(TORCH)
COLAB_JUPYTER = JUPYTER_PATH=$(abspath $(COLAB_DIR))/share/jupyter NORMS_COLAB_DIR=$(abspath $(COLAB_DIR))
# nbval runs each notebook in the Colab-like kernel. The cell timeout is only there
# against a hang: speed is measured and reported by `make bench-book`, never a test.
# The kernel `colab-portable` is that kernel with other CPU settings than `make execute` stores
# the outputs with (the machine's own SIMD width, two threads): ATen's generic kernels and one
# thread. A pass there means that no stored output depends on the SIMD width or on the thread
# count (issue 22). `make test-notebooks NBVAL_KERNEL=colab` runs them with this machine's own settings.
NBVAL_KERNEL ?= colab-portable
NBVAL = --nbval --nbval-sanitize-with tools/nbval_sanitize.cfg --nbval-kernel-name $(NBVAL_KERNEL) --nbval-cell-timeout 600
HOST   ?= 127.0.0.1
PORT   ?= 8000
JOBS   ?= 2
# make test's pytest workers: one more than the cores, so that a worker waiting (a kernel
# starting, a grading process at its time limit, a page loading in the browser) leaves no
# core idle (measured: with two workers the cores were busy 1.5 of 2 on average)
TEST_JOBS ?= 3
# (and the longest files are handed out first, conftest.py's order: --no-loadscope-reorder, or
# xdist hands out the files with the most tests first and a long notebook can start last)
# Each worker (and each process it starts) runs torch with one thread: with two OpenMP threads
# in each of three workers on two cores, the threads spin-wait for each other (measured: the
# unit tests of norms took 144 s of CPU with two threads a worker, 70 s with one). A test about
# threads sets its own count (torch.set_num_threads); the notebooks' kernel has one thread anyway.
TEST_THREADS ?= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# more pytest options for make test, e.g. PYTEST_ARGS=--durations=0
PYTEST_ARGS ?=

# Independent set-up steps run two at a time (the Colab-like venv's pip next to the project's,
# the site's build next to the student edition's): the machine has two cores.
MAKEFLAGS += --jobs=2

# Python keeps its bytecode caches (__pycache__/, ignored by git) under make, even where the
# environment says not to (PYTHONDONTWRITEBYTECODE, set on some machines): the tests start
# hundreds of processes that import norms, and every pytest worker rewrites the asserts of every
# test module; without the caches each of them compiled it all again (measured: the tests' CPU
# time 1,680 -> 1,570 s).
unexport PYTHONDONTWRITEBYTECODE

PY_STAMP     := $(VENV)/.installed
NPM_STAMP    := node_modules/.installed
ASSET_STAMP  := _build/assets/.copied
CHROME_STAMP := $(VENV)/.chromium

.PHONY: help book site student-site test lint translations stored-outputs colab-packages test-portable test-unit test-notebooks test-browser test-colab colab-venv bench-book serve execute clean prereqs setup bench student assignments test-courses grade slides

help: ## list the targets
	@echo "Normalization, from Scratch"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-15s %s\n", $$1, $$2}'

NO_PYTHON := $(PYTHON) not found: install Python 3.11 (Debian: apt-get install python3.11 python3.11-venv) or run make PYTHON=/path/to/python3.11
BAD_PYTHON := $(PYTHON) is not a Python 3.11 with venv and ensurepip: install python3.11-venv or run make PYTHON=/path/to/python3.11
NO_NPM := npm not found: install Node.js and npm (Debian: apt-get install nodejs npm); the site's MathJax and widget scripts come from the npm registry
NO_CXX := g++ not found: install it (Debian: apt-get install g++); torch.compile on the CPU and the kernels of norms.fast.cpu_kernels compile C++
NO_CROSS_CXX := optional: aarch64-linux-gnu-g++ not found, so the test that builds the C++ kernels for ARM skips (Debian: apt-get install g++-aarch64-linux-gnu)

# Each missing prerequisite stops make with one line ($(error) prints exactly one).
prereqs: ## check that python3.11, npm and g++ are on this machine (and say if the optional aarch64 cross compiler is not)
	$(if $(shell command -v $(PYTHON)),,$(error $(NO_PYTHON)))
	$(if $(shell $(PYTHON) -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null && echo ok),,$(error $(BAD_PYTHON)))
	$(if $(shell command -v npm),,$(error $(NO_NPM)))
	$(if $(shell command -v g++),,$(error $(NO_CXX)))
	$(if $(shell command -v aarch64-linux-gnu-g++),,$(info $(NO_CROSS_CXX)))
	@:

$(PY_STAMP): requirements.txt pyproject.toml | prereqs
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make: installing Python packages into $(VENV) (log: $(VENV)/pip.log)"
	@$(PIP) install $(TORCH_PIN) $(UV_PIN) > $(VENV)/pip.log 2>&1 || { echo "make: pip could not install $(TORCH_PIN) and $(UV_PIN) (no network to PyPI?): see $(VENV)/pip.log"; exit 1; }
	@$(UV) pip install --python $(PY) --compile-bytecode -r requirements.txt >> $(VENV)/pip.log 2>&1 || { echo "make: uv could not install requirements.txt (no network to PyPI?): see $(VENV)/pip.log"; exit 1; }
	@$(PIP) install --no-deps --no-build-isolation -e . >> $(VENV)/pip.log 2>&1 || { echo "make: pip could not install norms in editable mode: see $(VENV)/pip.log"; exit 1; }
	@touch $@

$(NPM_STAMP): package.json package-lock.json | prereqs
	@echo "make: installing the site's JavaScript from the npm registry (npm ci)"
	@npm ci --no-audit --no-fund --ignore-scripts > .npm-ci.log 2>&1 || { echo "make: npm ci failed (no network to the npm registry?): see .npm-ci.log"; exit 1; }
	@rm -f .npm-ci.log
	@touch $@

# Served from the site itself (Sphinx copies _build/assets into _static/).
# Never under a folder named _static: jupyter-book 1.x adds a <script> for every .js there.
$(ASSET_STAMP): $(NPM_STAMP)
	@rm -rf _build/assets && mkdir -p _build/assets/vendor/html-manager
	@cp -r node_modules/mathjax/es5 _build/assets/vendor/mathjax
	@cp node_modules/requirejs/require.js _build/assets/vendor/require.js
	@cp node_modules/@jupyter-widgets/html-manager/dist/*.js _build/assets/vendor/html-manager/
	@cp node_modules/@jupyter-widgets/html-manager/dist/*.{woff,woff2,ttf,eot,svg} _build/assets/vendor/html-manager/
	@touch $@

$(CHROME_STAMP): | $(PY_STAMP)
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "make: installing Debian's chromium for the browser tests"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } > $(VENV)/apt.log 2>&1 \
	  || { echo "make: could not install chromium (needs root and Debian's package mirror): run 'apt-get install chromium' as root; log: $(VENV)/apt.log"; exit 1; }; }
	@command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || { \
	  echo "make: installing Debian's g++-aarch64-linux-gnu (optional: the test that builds the kernels for ARM)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu; } >> $(VENV)/apt.log 2>&1 \
	  || echo "make: could not install g++-aarch64-linux-gnu (needs root): the ARM build test will skip"; }
	@touch $@

setup: $(PY_STAMP) $(ASSET_STAMP) ## install everything (venv, norms, npm assets); make book/test do this

# The four builds of the book (the site and the student edition, in English and in Chinese) share
# one execution of a page executed on every build (the instructors' page), in this folder:
# emptied here, before any of them (tools/sphinx_local/shared_execution.py).
SHARED_EXECUTION := NORMS_SHARED_EXECUTION=$(abspath _build/executed)

# Both sites show the stored outputs: checked once, before either is built.
stored-outputs: setup
	@rm -rf _build/executed
	@$(PY) tools/stored_outputs.py

book: site slides ## build the site into _build/html (warnings are errors), the slide decks in _build/html/slides
	@cp -r _build/slides _build/html/slides   # linked from the instructors' page
	@rm -rf _build/html/slides/zh && cp -r _build/slides/zh _build/html/zh/slides   # and from its Chinese twin
	@echo "make: site built: _build/html/index.html (make serve to read it)"

# The Sphinx builds need no slides (the decks are copied in afterwards): they start without
# waiting for them, beside them (the site's and the student edition's builds are the longest steps).
site: stored-outputs
	@rm -rf _build/html   # no file of an earlier build may hide a missing one
	@$(SHARED_EXECUTION) $(BIN)/jupyter-book build . --warningiserror --keep-going --quiet
	@$(SHARED_EXECUTION) $(PY) tools/i18n.py html _build/html/zh   # the Chinese edition, from locales/ (its own URLs under zh/)

# otter assign runs the tests on each solution (about 15 s of CPU each): make test's own tests
# grade the solutions (tests/test_assignments.py), so its build of the assignments does not
test: ASSIGNMENTS_ARGS := --no-run-tests
test: lint book slides student assignments $(CHROME_STAMP) colab-venv ## lint, build, then every test: norms, notebooks (nbval in the Colab-like kernel), browser, courses
	@$(COLAB_JUPYTER) $(TEST_THREADS) $(BIN)/pytest -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder book tests $(NBVAL) -q --durations=25 $(PYTEST_ARGS)

lint: setup ## ruff: lint and format check of norms/, tests/ and tools/
	@$(BIN)/ruff check --quiet norms tests tools
	@$(BIN)/ruff format --check --quiet norms tests tools

test-unit: setup ## only the unit tests of norms (fast)
	@$(TEST_THREADS) $(BIN)/pytest -n $(JOBS) --dist loadfile tests -q -m "not browser and not colab and not courses"

test-notebooks: setup colab-venv ## only nbval over the notebooks (in the Colab-like kernel)
	@$(COLAB_JUPYTER) $(BIN)/pytest -n $(JOBS) --dist loadfile book $(NBVAL) -q


test-portable: NBVAL_KERNEL = colab-portable
test-portable: setup colab-venv ## nbval in the portable kernel (ATen's generic SIMD, one thread), as make test runs it: no stored output may depend on the CPU
	@$(COLAB_JUPYTER) $(BIN)/pytest -n $(JOBS) --dist loadfile book $(NBVAL) -q

test-browser: book slides $(CHROME_STAMP) ## only the browser checks of the built site and of the slide decks
	@$(BIN)/pytest tests -q -m browser

test-colab: setup colab-venv ## the Colab-like kernel: its checks and nbval over every notebook (TORCH=2.14.1 for another torch)
	@$(COLAB_JUPYTER) $(BIN)/pytest -n $(JOBS) --dist loadfile tests book -m colab $(NBVAL) -q

# The Colab-like venv's packages need only the system's Python: installed next to the project's
# own venv (each installs torch with pip and the rest with uv: about half a minute), not after it.
colab-packages: | prereqs
	@$(PYTHON) tools/colab_venv.py $(COLAB_DIR) --torch $(TORCH) --packages-only

colab-venv: setup colab-packages ## the Colab-like venv and kernel; the notebooks' setup cell installs norms in it (TORCH=, COLAB_DIR=)
	@$(PY) tools/colab_venv.py $(COLAB_DIR) --torch $(TORCH)

bench-book: setup ## run every notebook and report wall time per notebook and per cell against the budgets (never fails on speed)
	@$(PY) tools/bench_book.py

slides: setup ## one reveal.js deck per chapter, offline, from its notebook: _build/slides/index.html
	@$(PY) tools/slides.py
	@$(PY) tools/slides.py --zh   # the Chinese edition's decks, from zh/book/: _build/slides/zh

# Built next to the book (its own Sphinx build in _build/student-build), not after it.
translations: setup ## after an English edit: update the Chinese catalogs (locales/) and notebooks (zh/); then translate the new and fuzzy entries
	@$(PY) tools/i18n.py update

student: student-site slides ## the student edition, English and Chinese: the site without solutions (_build/student/html, html/zh), student notebooks (_build/student/notebooks, notebooks/zh)
	@rm -rf _build/student/html/slides && cp -r _build/slides _build/student/html/slides
	@rm -rf _build/student/html/zh/slides && cp -r _build/slides/zh _build/student/html/zh/slides

student-site: stored-outputs
	@$(SHARED_EXECUTION) $(PY) tools/student.py
	@$(SHARED_EXECUTION) $(PY) tools/student.py --language zh

assignments: setup ## the otter-grader assignments: student notebooks and autograders in _build/assignments (those whose sources changed)
	@$(PY) tools/assignments.py $(ASSIGNMENTS_ARGS)

# grade.py checks its arguments first, then builds that one assignment if its sources changed
# (the quotes: a folder's name may have spaces)
grade: setup ## grade a class without Docker: make grade ASSIGNMENT=<name> SUBMISSIONS=<folder> [LANGUAGE=zh] (grades.csv, feedback/)
	@$(PY) tools/grade.py "$(ASSIGNMENT)" "$(SUBMISSIONS)" $(if $(GRADES),--out "$(GRADES)") $(if $(LANGUAGE),--language "$(LANGUAGE)")

test-courses: student assignments ## only the checks of the student edition and of the assignments (otter run)
	@$(TEST_THREADS) $(BIN)/pytest -n $(JOBS) tests -q -m courses

serve: book ## serve the built site on http://127.0.0.1:8000 (HOST=, PORT= to change)
	@echo "Serving _build/html on http://$(HOST):$(PORT) (Ctrl-C stops)"
	@$(PY) -m http.server $(PORT) --bind $(HOST) --directory _build/html

execute: setup ## re-run every notebook and store its outputs (commit the result)
	@$(PY) tools/execute.py

bench: setup ## time every layer (torch.nn, norms, fused) into _build/bench/, at 1 and 2 threads (BENCH_ARGS="--threads 1")
	@$(PY) tools/bench.py $(BENCH_ARGS)

clean: ## remove the build, the venv and node_modules
	rm -rf _build $(VENV) node_modules .npm-ci.log
