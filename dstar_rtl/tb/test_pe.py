"""cocotb tests of one generated PE, ``dstar_pe`` (:class:`rtl.pe.SlicePE`) or
``dstar_baseline_pe`` (:class:`rtl.pe.Int8PE`), against the golden PE functions
(:func:`golden.schedule.slice_pe_execute`, :func:`golden.schedule.int8_pe_execute`).

Every output is compared after every clock edge (``tb.pe_tb``, ``sim.pe_vectors``); a missing or
extra ``captured`` pulse, or a result at the wrong cycle, fails. Knobs (environment):
``DSTAR_PE_TILES`` random tiles of the ``stream`` test (default 20), ``DSTAR_PE_DENSE_TILES``
tiles of the ``dense`` test (default 4; ``dstar power`` runs more on the gate-level PE).
"""

import cocotb

from .array_tb import env_int
from .pe_tb import pe_kind, run_sections


@cocotb.test()
async def operands(dut):
    """Slice PE: every raw digit with both signed flags in every lane (one-product tiles, then
    with every exponent), then every exponent 0..max_exp in multi-group tiles. INT8 PE: every
    pair of operand extremes."""
    sections = ("digits", "exponents") if pe_kind(dut) == "slice" else ("products",)
    await run_sections(dut, *sections)


@cocotb.test()
async def stream(dut):
    """Random tiles back to back (single-group tiles too), bubbles with garbage operands and
    control inside and between tiles, random drain shifts through the shadow chain."""
    await run_sections(dut, "stream")


@cocotb.test()
async def overflow(dut):
    """With ``overflow_detect``: the sticky flag fires on tiles that saturate (up, down, back into
    range, Horner's final shift) with golden's saturated value, and stays clear on tiles that
    fit. Otherwise: the register wraps like golden's, and wrapping partial sums cancel (where a
    short tile can wrap it)."""
    (case,) = await run_sections(dut, "overflow")
    over = {"over+", "over-", "recover", "final-shift"}
    if "ovf_out" in case.expected[0]:
        flags = [f for (_, f), t in zip(case.results, case.tags) if t in over]
        assert flags and all(flags), "the stimulus must overflow the narrow accumulator"
        assert "fit" in case.tags
    elif "wrap" not in case.tags:
        dut._log.info("overflow: this register cannot wrap within a short tile; large sums only")


@cocotb.test()
async def dense(dut):
    """The energy workload: ``DSTAR_PE_DENSE_TILES`` tiles of random full-range operands every
    cycle, no bubbles, the shadow chain still (``sim.pe_vectors`` section ``dense``)."""
    await run_sections(dut, "dense", tiles=env_int("DSTAR_PE_DENSE_TILES", 4))
