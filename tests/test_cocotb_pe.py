"""The cocotb regression of one PE on generated Verilog (units ``pe`` and ``baseline_pe``), in
Verilator and Icarus: ``tb/test_pe.py`` against the golden PE functions.

Fast tier (``make test``): one build per configuration and simulator, a few hundred cycles per
cocotb test; both simulators see both PEs, Icarus both alignments, wrapping and saturating
accumulators, ``pe_stages`` 0..2, Booth digits with select products and the broadcast PEs.
Long tier (``-m slow``): every configuration on both
simulators, more seeds and longer random streams.
"""

import pytest

from dstar_rtl.golden.config import preset
from dstar_rtl.sim.runner import run_cocotb

CONFIGS = {
    "tiny": ("pe", dict()),
    "ovf12-stages0": ("pe", dict(acc_width=12, overflow_detect=True, pe_stages=0)),
    "horner-ovf14-stages2": ("pe", dict(packer="sort", alignment="horner", max_reduction=2,
                                        acc_width=14, overflow_detect=True, pe_stages=2)),
    "horner-stages0": ("pe", dict(packer="sort", alignment="horner", max_reduction=2, pe_stages=0)),
    "stages2": ("pe", dict(pe_stages=2)),
    "lanes2-w6": ("pe", dict(lanes=2, weight_width=6, e_max=5)),
    "booth": ("pe", dict(digits="booth", digit_product="select")),
    "booth-horner-ovf12": ("pe", dict(digits="booth", digit_product="select", packer="sort",
                                      alignment="horner", max_reduction=2, acc_width=12,
                                      overflow_detect=True)),
    "select": ("pe", dict(digit_product="select")),
    "booth-multiply": ("pe", dict(digits="booth")),
    "broadcast": ("pe", dict(weight_hop=4, act_hop=4, digits="booth", digit_product="select")),
    "int8-broadcast": ("baseline_pe", dict(weight_hop=4, act_hop=4)),
    "int8": ("baseline_pe", dict()),
    "int8-stages0": ("baseline_pe", dict(pe_stages=0)),
    "int8-w4-stages2": ("baseline_pe", dict(weight_width=4, max_reduction=4, pe_stages=2)),
}

# Verilator (two builds, each a second of run on a few seconds of build): both PEs, the slice
# PE product-shift wrapping at pe_stages 1, the INT8 PE at 0. Icarus (cheap builds): Horner with
# a saturating accumulator at pe_stages 2, Booth digits with select products (issue 15), the
# broadcast PEs without w_out and a_out registers, a narrow INT8 PE. Every configuration on both
# simulators in ``make regress``; every one in Amaranth's simulator in ``make test``
# (tests/test_pe_amaranth.py).
FAST = [("tiny", "verilator"), ("int8-stages0", "verilator"),
        ("tiny", "icarus"), ("horner-ovf14-stages2", "icarus"), ("int8-w4-stages2", "icarus"),
        ("booth-horner-ovf12", "icarus"), ("broadcast", "icarus"), ("int8-broadcast", "icarus")]
SLOW = [(c, s) for c in CONFIGS for s in ("verilator", "icarus") if (c, s) not in FAST]


def _run(name, simulator, seed, **kw):
    unit, overrides = CONFIGS[name]
    return run_cocotb(unit, preset("tiny", **overrides), simulator, "dstar_rtl.tb.test_pe",
                      seed=seed, **kw)


@pytest.mark.cocotb
@pytest.mark.parametrize("name, simulator", FAST)
def test_pe_regression(name, simulator):
    assert _run(name, simulator, 1).tests == 4


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("name, simulator", FAST + SLOW)
def test_pe_regression_long(name, simulator, seed):
    _run(name, simulator, seed, extra_env={"DSTAR_PE_TILES": "120"}, tag="long")
