"""The analytic estimate of the whole core (``estimate("core", cfg)``), composed from its parts.

The core (:class:`rtl.core.Core`) is the MPU, the QPU and the VPU, the buffers, four engines and
the dispatcher. :func:`core_parts` returns its parts for :func:`flows.estimate.estimate`:

- the MPU's PE array and front end, the QPU's and the VPU's parts: the calibrated model's parts
  (:mod:`flows.estimate_parts`), as for those units alone (the MPU's weight memory has the core's
  ``wmem_rows`` rows instead of ``max_reduction``; the VPU without ``acc_requant``, as the core
  builds it);
- the buffers ABUF (``T`` banks, two read ports), XBUF, YBUF, RBUF, VBUF, MASK and GMEM, depths
  from :func:`program.isa.core_for`: block and LUT RAM counted structurally as for the
  units' memories (:func:`flows.estimate_parts.memory`), and in generic gates their bits as
  flip-flops with a read multiplexer per port;
- the dispatcher's two address products: one MULT18X18D each, and the matrix engine's
  requantizer, ``T`` products of ``acc_bits`` by ``mult_width + 1`` bits (without DSP blocks
  their LUTs are not added: the control line below holds the requantizer's adders and
  registers);
- *control*: the engines, the dispatcher, the buffers' shared ports, the counters and the
  rest of the top. No feature model exists for it: its LUTs, flip-flops and LUT RAM are the
  straight line, in the bits the core moves per buffer row (:func:`datapath_bits`), through
  the two measured cores of ``reports/core_area.json`` (:data:`CORE_MEASURED`, ``tiny`` and
  ``fpga``; ``dstar measure core-area``). That run maps LUTs with ``abc`` module by module
  (``abc9`` asserts on the core in Yosys 0.70), not the flattened ``abc9`` flow the other
  coefficients were fitted to. Its generic transistors count only its flip-flops (no generic
  synthesis of the core is measured), so the core's transistor figure is a lower bound.

Against the two measured cores (the presets' defaults; 2026-12-03, the VPU's softmax rows
pipelined) the estimate is within 2.9 % on LUTs and 1.7 % on flip-flops, and exact on DSP blocks
(see :func:`measured_error`); those are the points the control line goes through, so the error
is that of the composed parts, not a held-out check.
Block RAM is exact on ``fpga``; on ``tiny`` Yosys puts RBUF in five DP16KD where the cost rule of
``memory`` picks LUT RAM (45 against 50 blocks).

This module prices parts with :mod:`flows.estimate_coef` and takes the units' parts from
:mod:`flows.estimate_parts`; :mod:`flows.estimate` imports it, never the other way round.
"""

from __future__ import annotations

from dstar_rtl.golden.config import Config, preset
from dstar_rtl.golden.layouts import group_layout, layout_width
from dstar_rtl.program import isa

from .estimate_coef import CALIBRATION, ecp5_resources
from .estimate_parts import (
    Part,
    array_front,
    array_pes,
    dsp_blocks,
    memory,
    unit_parts,
    vpu_parts,
)

__all__ = ["core_parts", "datapath_bits", "control", "measured_error", "model_note",
           "CORE_MEASURED"]

#: The measured cores (``reports/core_area.json``, Yosys 0.70, 2026-12-03, with the matrix
#: engine's requantizer, its ``Y'`` out after one stage, and the VPU's softmax rows pipelined),
#: the presets' default configurations: ``control`` sums its parts other
#: than the PE array, MPU front end, QPU (front, sorter, packer or exponent bins) and VPU (LUT
#: total = LUT4 + 2 × CCU2C, flip-flops; LUT RAM of the M, Q and V engines, whose FIFOs it
#: holds); ``total`` is the flattened netlist.
#: ``tests/test_cli_estimate.py`` checks them against the report file.
CORE_MEASURED = {
    "tiny": {"config_hash": "c28b614f012c92b0",
             "control": {"lut": 16540, "ff": 6294, "lutram": 160},
             "total": {"lut_total": 37672, "ff": 12726, "dsp": 36, "bram": 49, "lutram": 182}},
    "fpga": {"config_hash": "c8a452d83e4ad8db",
             "control": {"lut": 28504, "ff": 10328, "lutram": 302},
             "total": {"lut_total": 78554, "ff": 24565, "dsp": 65, "bram": 169,
                       "lutram": 247}},
}

#: Parts of ``reports/core_area.json`` that :data:`CORE_MEASURED`'s ``control`` leaves out (the
#: model's own parts) and the parts whose LUT RAM it counts.
COMPUTE_PARTS = ("PE array", "MPU front end + WMEM", "QPU (max, bins, slice, chunker)",
                 "QPU sorter", "QPU packer", "VPU")
ENGINE_PARTS = ("M engine (replay, drain)", "Q engine (diff pair, x̂ update)", "V engine")

#: Buffers with their read ports (rtl/core.py).
_BUFFERS = (("XBUF", 2), ("YBUF", 1), ("RBUF", 1), ("VBUF", 2), ("MASK", 1))


def datapath_bits(cfg: Config) -> int:
    """The bits the core moves per buffer row: ABUF (``T × act_width``), XBUF, YBUF, RBUF, VBUF,
    MASK and WMEM rows and one GMEM group, summed. The control's cost is a line in it."""
    bits = cfg.tile * cfg.act_width + layout_width(group_layout(cfg))
    return bits + sum(isa.row_width(cfg, b) for b, _ in _BUFFERS) + isa.row_width(cfg, "WMEM")


def control(cfg: Config) -> dict:
    """LUTs, flip-flops and LUT RAM of the core's control for ``cfg``: the line through
    :data:`CORE_MEASURED` in :func:`datapath_bits` (clipped at zero)."""
    (na, a), (nb, b) = CORE_MEASURED.items()
    wa, wb = (datapath_bits(preset(n)) for n in (na, nb))
    w = datapath_bits(cfg)
    out = {}
    for k in ("lut", "ff", "lutram"):
        ya, yb = a["control"][k], b["control"][k]
        out[k] = max(0.0, ya + (yb - ya) * (w - wa) / (wb - wa))
    return out


def _buffer_parts(cfg: Config, core: isa.CoreConfig) -> list:
    def part(name, count, depth, width, ports):
        mem = memory(depth, width, ports)
        mem.pop("ff")   # the glue around a block RAM's write port is in the control's figures
        # Generic gates have no RAM: the bits are flip-flops, each read port a depth:1 mux.
        return Part(f"{name} buffer ({depth} x {width} bit, {ports} read port"
                    f"{'s' if ports > 1 else ''})", count, {"g.rd": ports * width * depth},
                    mem_bits=depth * width, **mem)

    T = cfg.tile
    out = [part("ABUF bank", T, core.abuf_rows, cfg.act_width, 2)]
    out += [part(b, 1, isa.buffer_depth(core, b), isa.row_width(cfg, b), ports)
            for b, ports in _BUFFERS]
    out.append(part("GMEM", 1, core.gmem_rows, layout_width(group_layout(cfg)), 1))
    return out


def core_parts(cfg: Config) -> list:
    """The parts of the core for ``cfg`` (module docstring). Raises ValueError when the core or
    one of its units refuses the configuration (``rows == cols == vpu_lanes``, the QPU's
    ``sort_n``, the VPU's shifts)."""
    isa.check_core(cfg)
    core = isa.core_for(cfg)
    mpu = [*array_pes(cfg, False), array_front(cfg, False, depth=core.wmem_rows)]
    c = control(cfg)
    ctl = Part("core control: engines, dispatcher, ports", 1, {},
               dsp=(2 * dsp_blocks(isa.ADDR_BITS + 1, isa.ADDR_BITS)       # the dispatcher
                    + cfg.tile * dsp_blocks(cfg.acc_bits, cfg.mult_width + 1)),  # M's requant
               lutram=round(c["lutram"]),
               fixed={"lut": c["lut"], "lut_nodsp": c["lut"], "ff": c["ff"],
                      "transistors": c["ff"] * CALIBRATION["coef"]["transistors"]["ff"]})
    return (mpu + unit_parts("qpu", cfg) + vpu_parts(cfg, requant=False)
            + _buffer_parts(cfg, core) + [ctl])


def measured_error() -> dict:
    """``{preset: {lut, ff, dsp, bram}}``: the estimate / the measured core - 1, for each core
    of :data:`CORE_MEASURED`."""
    out = {}
    for name, m in CORE_MEASURED.items():
        e, t = ecp5_resources(core_parts(preset(name))), m["total"]
        out[name] = {k: e[f] / t[f] - 1 for k, f in (("lut", "lut_total"), ("ff", "ff"),
                                                      ("dsp", "dsp"), ("bram", "bram"))}
    return out


def model_note() -> dict:
    """What :func:`flows.estimate.estimate` records of the core's model: the source of the
    control's figures and the error against the measured cores (not held out)."""
    return {"control": "line through the measured tiny and fpga cores in the bits moved per "
                       "buffer row (reports/core_area.json, abc module by module)",
            "measured": sorted(CORE_MEASURED),
            "error_vs_measured": measured_error(),
            "transistors": "lower bound: the control's count only its flip-flops"}
