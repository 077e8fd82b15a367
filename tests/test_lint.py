"""Verilator ``--lint-only -Wall`` on every generated unit: zero warnings after the documented
waivers of ``sim/lint.vlt``."""

import pytest

from dstar_rtl.gen.units import top_name
from dstar_rtl.golden.config import preset
from dstar_rtl.sim.lint import lint
from dstar_rtl.sim.runner import ensure_verilog

VARIANTS = {
    "tiny": ("tiny", {}),
    "fpga": ("fpga", {}),
    "stages0": ("tiny", dict(pe_stages=0)),
    "stages2": ("tiny", dict(pe_stages=2)),
    "horner": ("tiny", dict(packer="sort", alignment="horner", max_reduction=2, pe_stages=2)),
    "overflow": ("tiny", dict(acc_width=14, overflow_detect=True)),
    "nodrop-lanes2": ("tiny", dict(drop_zero_columns=False, lanes=2, sort_n=16)),
    "dram": ("tiny", dict(dram_width=32)),
}


# The chain is the QPU and the MPU side by side: linting it once checks only the connection.
# make test lints every unit at tiny, the arrays at fpga and the Horner slice PE and MPU; the
# other variants and the fpga QPU and VPU (seconds of Verilog generation each) in make regress.
CASES = [(u, v) if (v == "tiny" or (v == "fpga" and u != "qpu")
                    or (u, v) in {("pe", "horner"), ("mpu", "horner")})
         else pytest.param(u, v, marks=pytest.mark.slow)
         for u in ("pe", "baseline_pe", "mpu", "baseline", "qpu") for v in sorted(VARIANTS)]
CASES.append(("qpu_mpu", "tiny"))
# The fpga core (35 s of Verilator) in regress; the tiny core has the same modules.
CASES += [("vpu", "tiny"), pytest.param("vpu", "fpga", marks=pytest.mark.slow),
          ("uart_vpu", "tiny"), ("core", "tiny"), ("core", "dram"),
          pytest.param("core", "fpga", marks=pytest.mark.slow)]


@pytest.mark.parametrize("unit, variant", CASES)
def test_lint_clean(unit, variant):
    name, overrides = VARIANTS[variant]
    cfg = preset(name, **overrides)
    v = ensure_verilog(unit, cfg)
    assert lint(v, top_name(unit)) == []
