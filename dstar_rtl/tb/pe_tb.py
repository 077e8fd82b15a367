"""The cocotb harness of one PE (units ``pe`` and ``baseline_pe``): clock, reset, every input
driven every cycle, every output sampled every cycle, checked by :func:`sim.pe_vectors.check_run`.

Each cycle the harness writes the cycle's inputs at the falling edge and samples the outputs in
the read-only phase that follows, i.e. the outputs of the previous cycle seen with the next
inputs applied (a combinational path to an output is a difference). The outputs sampled before
the first clock edge are the ones out of reset.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from dstar_rtl.gen.units import top_name
from dstar_rtl.sim.pe_vectors import PECase, check_run, pe_case

from .array_tb import config_from_env, env_int
from .streams import reset, start_clock

__all__ = ["pe_kind", "run_case", "run_sections"]

KINDS = {top_name("pe"): "slice", top_name("baseline_pe"): "int8"}


def pe_kind(dut) -> str:
    """"slice" (``dstar_pe``) or "int8" (``dstar_baseline_pe``), from the top-level's name."""
    if dut._name not in KINDS:
        raise ValueError(f"dstar_rtl.tb.pe_tb drives {sorted(KINDS)}, not {dut._name}")
    return KINDS[dut._name]


def _read(handle, signed: bool) -> int:
    v = handle.value
    if len(handle) == 1:        # a one-bit port reads as a Logic, not a LogicArray
        return int(v)
    return v.to_signed() if signed else v.to_unsigned()


async def run_case(dut, case: PECase):
    """Reset the PE, run ``case`` and check it; returns the outputs per cycle. The clock must
    be running (:func:`run_sections` starts it)."""
    ins = {n: getattr(dut, n) for n in case.inputs[0]}
    outs = {n: getattr(dut, n) for n in case.expected[0]}
    masks = {n: (1 << len(h)) - 1 for n, h in ins.items()}
    await FallingEdge(dut.clk)      # out of any read-only phase a previous case ended in
    for h in ins.values():
        h.value = 0
    await reset(dut)
    initial, got = {}, []
    for k, inp in enumerate([*case.inputs, case.probe]):
        await FallingEdge(dut.clk)
        for n, v in inp.items():
            ins[n].value = v & masks[n]
        await ReadOnly()
        sample = {n: _read(h, n == "shadow_out") for n, h in outs.items()}
        if k == 0:
            initial = sample
        else:
            got.append(sample)
    check_run(case, initial, got)
    return got


async def run_sections(dut, *sections: str, tiles: int | None = None) -> list:
    """Start the clock, then build each section's vectors for this PE and configuration (seed:
    cocotb's; random tiles of ``stream`` and ``dense``: ``tiles``, by default
    ``DSTAR_PE_TILES``, itself by default 20), reset, run and check them in turn. Returns the
    cases."""
    cfg, kind = config_from_env(), pe_kind(dut)
    start_clock(dut)
    cases = []
    n = env_int("DSTAR_PE_TILES", 20) if tiles is None else tiles
    for section in sections:
        case = pe_case(cfg, kind, section, seed=cocotb.RANDOM_SEED, tiles=n)
        await run_case(dut, case)
        dut._log.info(f"{section}: {len(case.inputs)} cycles, {len(case.results)} tiles checked")
        cases.append(case)
    return cases
