"""A cheap analytic estimate of a unit's resources and peak throughput from its configuration.

No elaboration and no synthesis: :func:`estimate` takes a :class:`~golden.config.Config` and
returns in milliseconds (any preset, ``paper`` included) the estimated ECP5 LUT total (LUT4 + 2
× CCU2C, as :func:`flows.synth.resources` counts it; ``synth_ecp5`` with and without DSP blocks),
flip-flops, DSP blocks, block and LUT RAM, generic CMOS transistors (Yosys ``stat -tech cmos``
after ``dfflegalize``, as :mod:`flows.synth` reports them), and the peak operations per cycle.

The model
---------
A unit is a sum of *parts* (a PE times the number of PEs, the array's front end, the QPU's
front, chunk assembler, sorter, packer and store, a VPU lane times ``vpu_lanes``, the VPU's row
scalars and control; the core is these parts plus its buffers and its control). Every part
carries, per instance, *features* computed from the configuration by reading the RTL: register
bits (``reg.*``, with what Yosys removes or merges), widths of the datapath elements that cost
LUTs and gates, and structurally counted DSP blocks, block and LUT RAM. Each resource is Σ
coefficient × feature, the coefficients fitted once on real synthesis. The model's files:

- this module: :func:`estimate`, :func:`parts` (unit → parts), :func:`peak`, :data:`TOLERANCE`;
- :mod:`flows.estimate_parts`: each unit's parts and their features (the features are defined
  in its docstring), the structural DSP and memory counts;
- :mod:`flows.estimate_core`: the core's composition (units' parts, buffers, measured control);
- :mod:`flows.estimate_coef`: the stored calibration :data:`CALIBRATION` (coefficients,
  measurements, errors; ``flows/estimate_calibration.json``) and the pricing of parts;
- :mod:`flows.estimate_fit`: the fitted and held-out runs and the fit itself;
- the synthesis that measures the runs is the application's: ``dstar measure estimate``
  (:mod:`app.benches.estimate_calibration`).

Calibration
-----------
The coefficients (:data:`CALIBRATION`) were fitted once by non-negative least squares
(:func:`scipy.optimize.nnls`) on the relative error against real synthesis
(:func:`flows.synth.synthesize`: Yosys 0.70, one fresh process per run) of the 44 small
configurations in :data:`CALIBRATION_RUNS` (PE, INT8 PE, MPU and baseline variants, the select
datapath's PEs and MPUs, the sorter alone, the QPU, the VPU lane alone, the VPU), each for
``ecp5``, ``ecp5 -nodsp`` and ``generic``; the flip-flop coefficients are 0.9999, 0.991 and
0.977 flip-flops per counted bit of the arrays, the QPU and the VPU. ``dstar measure estimate
--calibrate`` re-runs that synthesis (reusing stored runs of identical RTLIL, script and
Yosys), fits, and prints every run's error and that of the 18 held-out configurations of
:data:`VALIDATION_RUNS`; ``--write`` stores the result in ``flows/estimate_calibration.json``,
and ``--refit`` fits the stored measurements again without synthesis (after a change of the
model alone); ``--calibrate --missing`` synthesizes only the runs that have no stored
measurement (runs just added: the 13 select, Booth and ``weight_hop`` runs took 4 minutes) and
takes the others as stored. About 45 minutes on two cores from scratch: 20 for the held-out
``fpga`` MPU, most of the rest the VPU without DSP blocks.

Measured error (calibration of 2026-12-01; estimate / synthesis − 1)
--------------------------------------------------------------------
=================  ================================  ========================================
quantity           fitted runs (44)                  held out (18)
=================  ================================  ========================================
ECP5 LUTs          PE ≤ 8.1 % (select PE alone       ≤ 9.6 %, except +20.5 % (PE, 2 lanes,
                   ≤ 20.8 %), arrays ≤ 7.7 %,        pe_stages 0, with DSP blocks)
                   QPU ≤ 4.2 %, VPU ≤ 3.5 %
LUTs, ``-nodsp``   ≤ 7.7 % (select PE alone          ≤ 9.0 %, except −15.3 % (VPU, 2 lanes,
                   ≤ 21.0 %)                         act_width 12)
flip-flops         arrays ≤ 0.2 %, QPU/VPU ≤ 1.7 %   arrays ≤ 0.2 %, QPU/VPU ≤ 1.6 %
transistors        ≤ 1.1 %                           ≤ 3.5 %
=================  ================================  ========================================

The ``fpga`` MPUs (64 PEs, four times the largest fitted array) are among the held-out runs:
the default one LUTs −1.9 % (+0.2 % without DSPs), flip-flops exact, transistors −2.7 %; with
the select datapath and Booth digits (0 DSP) LUTs −9.6 %, flip-flops exact, transistors
−3.3 %. The select datapath's PE alone is its worst fitted run (``pe select+booth`` −20.8 %):
Yosys maps a lone select PE with ABC9 but every select array with the classic ABC (ABC9
asserts on them, :mod:`flows.synth`), and the two mappers differ by up to a third on it; the
``pe.alone`` constant takes the mean difference. ``weight_hop`` is modelled in the registers
(every ``weight_hop``-th row's PEs register ``w_out``; the others' stage-1 control is then a
register of its own; the row skew is ``i // weight_hop``): exact on the held-out MPU with
``weight_hop=2``, 3 flip-flops over on the broadcast baseline. ``act_hop`` likewise (every
``act_hop``-th column's PEs register ``a_out``; the column skew is ``j // act_hop``): exact on
the tiny MPU with ``act_hop = cols`` (2,072 flip-flops, with ``weight_hop = rows`` too 1,628),
3 over on the baseline as with ``weight_hop``; no re-fit (the hops change only register
counts).
The tests (``tests/test_estimate.py``) assert :data:`TOLERANCE`: 25 % on LUTs and transistors,
10 % on flip-flops (1 % and exact DSP/RAM counts for the arrays). The fit has nearly as many
coefficients per part as it has runs of that part, so the fitted errors flatter it: the held-out
column is the estimate's error. ECP5 synthesis of the QPU trips an assertion in Yosys 0.70's
``abc9`` for rows ≠ 4 with 4 lanes (see :data:`CALIBRATION_RUNS`): no such QPU is in the fit.

>>> r = estimate("mpu", preset("tiny"))                     # doctest: +SKIP
>>> r["peak"]["ops_per_cycle"], r["ecp5"]["dsp"]            # doctest: +SKIP
(64, 64)
"""

from __future__ import annotations

from dstar_rtl.golden.config import Config

from .estimate_coef import CALIBRATION, TARGETS, ecp5_resources, value
from .estimate_core import core_parts, model_note
from .estimate_fit import CALIBRATION_RUNS, VALIDATION_RUNS, errors, fit
from .estimate_parts import Part, front_registers, unit_parts

__all__ = ["estimate", "ecp5_resources", "parts", "peak", "front_registers", "Part", "UNITS",
           "TARGETS", "TOLERANCE", "CALIBRATION", "CALIBRATION_RUNS", "VALIDATION_RUNS", "fit",
           "errors"]

UNITS = ("pe", "mpu", "baseline", "qpu", "qpu_mpu", "vpu", "core")

#: The relative error the tests allow between estimate and synthesis: a documented tolerance,
#: wider than every error measured at calibration (``CALIBRATION["error"]``, fitted runs, and
#: ``CALIBRATION["validation"]``, held-out runs).
TOLERANCE = {"lut": 0.25, "lut_nodsp": 0.25, "ff": 0.10, "transistors": 0.25}


def parts(unit: str, cfg: Config) -> list:
    """The parts of ``unit`` for ``cfg``: :func:`flows.estimate_parts.unit_parts`, and for the
    core :func:`flows.estimate_core.core_parts`. Raises :class:`ValueError` for an unknown unit
    and where the RTL refuses the configuration."""
    if unit == "core":
        return core_parts(cfg)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {list(UNITS)}, not {unit!r}")
    return unit_parts(unit, cfg)


def peak(unit: str, cfg: Config) -> dict:
    """Peak operations per cycle of ``unit``."""
    R, C, L = cfg.rows, cfg.cols, cfg.lanes
    ww = cfg.weight_width
    if unit in ("mpu", "qpu_mpu", "pe", "core"):
        n = L if unit == "pe" else R * C * L
        # Four 2-bit digit-MACs make one INT8 x weight MAC.
        return {"ops_per_cycle": n, "op": f"2-bit x {ww}-bit digit-MACs",
                "int8_mac_equivalent": n // 4 if n % 4 == 0 else n / 4}
    if unit == "baseline":
        return {"ops_per_cycle": R * C, "op": f"{ww}-bit x {ww}-bit MACs"}
    if unit == "qpu":
        return {"ops_per_cycle": cfg.rows, "op": f"values quantized (one sub-channel of "
                                                 f"T = {cfg.rows})"}
    if unit == "vpu":
        return {"ops_per_cycle": cfg.vpu_lanes, "op": "elements"}
    raise ValueError(f"unit must be one of {list(UNITS)}, not {unit!r}")


def _worst(errs: dict) -> dict:
    """The largest relative error per target over ``{label: {target: error}}``."""
    return {t: max((abs(e[t]) for e in errs.values() if t in e), default=None) for t in TARGETS}


def estimate(unit: str, cfg: Config) -> dict:
    """The analytic estimate of ``unit`` for ``cfg``: ``{unit, preset, config_hash, peak,
    ecp5 {lut_total, ff, dsp, bram, lutram}, ecp5_nodsp {...}, generic {transistors,
    memory_bits}, parts [...], model {...}}``. Raises :class:`ValueError` for an unknown unit.

    For ``core`` (:mod:`flows.estimate_core`) ``model["core"]`` says how its control is
    estimated and its error against the measured cores, and ``generic["lower_bound"]`` is true:
    the control's transistors count only its flip-flops."""
    ps = parts(unit, cfg)
    out = dict(
        unit=unit, preset=cfg.name, config_hash=cfg.hash(), peak=peak(unit, cfg),
        ecp5=ecp5_resources(ps), ecp5_nodsp=ecp5_resources(ps, nodsp=True),
        generic=dict(transistors=round(value("transistors", ps)),
                     memory_bits=sum(p.count * p.mem_bits for p in ps)),
        parts=[dict(name=p.name, count=p.count,
                    lut=round(value("lut", [p])), lut_nodsp=round(value("lut_nodsp", [p])),
                    ff=round(value("ff", [p])), dsp=p.count * p.dsp,
                    bram=p.count * p.bram, transistors=round(value("transistors", [p])))
               for p in ps],
        model=dict(yosys=CALIBRATION["yosys"], calibrated=CALIBRATION["date"],
                   runs=len(CALIBRATION["error"]), held_out=len(CALIBRATION["validation"]),
                   tolerance=TOLERANCE,
                   max_calibration_error=_worst(CALIBRATION["error"]),
                   max_held_out_error=_worst(CALIBRATION["validation"])),
    )
    if unit == "core":
        out["model"]["core"] = model_note()
        out["generic"]["lower_bound"] = True
    return out
