"""``dstar power``: energy per MAC of the DSTAR MPU and of the INT8 array from gate-level
simulation of their Nangate45 netlists on the same real tiles.

Steps for each array (:func:`array_energy`):

1. **Netlist**: the ASIC flow (:func:`flows.synth.synthesize`, ``target="asic"``, ``parts``: the
   hierarchy kept until the end, so each cell knows its PE) on the user's library, reused when
   an identical run is stored; :func:`flows.gate.gate_sources` makes the simulation sources.
2. **Simulation**: ``tb/test_bench_layers.py``, the testbench of ``dstar bench``, streams the
   workload's layers through the gate-level netlist on Verilator and checks every drain beat
   against golden (the netlist's function proven on these vectors), with Verilator's toggle
   coverage counting every net's transitions (:func:`flows.power.toggles_from_coverage`).
3. **Energy**: :func:`flows.power.energy` (internal power from the cells' tables, ``½·C·V²`` per
   net transition, leakage) by part, over the run's cycles at the stated clock.

Besides the DiT's layers, :func:`precision_sweep` runs the MPU on random tiles whose every
sub-channel is at one precision (2, 4, 6, 8 bits) and the INT8 array on uniform 8-bit tiles of
the same shape, for pJ per MAC by precision.

``dstar power`` adds the energy per image (:func:`bench.image_energy.per_image`): the
QPU and the VPU measured the same way (:mod:`bench.unit_power`), one digits-DiT image
on each whole ``fpga`` core of the whole-core comparison (:mod:`bench.image_energy`:
RTL cycles, executor events, idle energy by part, per-access SRAM energies, levers not built)
and the paper chip on the projection's models (:mod:`perf.chip_energy`).

The workload (:func:`workload`) is ``dstar bench``'s: the layers of one block of the trained
digits DiT (or random weights of a named model) at the chosen steps, as the MPU's FMDQ group
stream and as dense INT8 tiles for the baseline, the same products on both. MACs are the layers'
``tokens · cin · cout``; both arrays' runs include their reset and weight loads. Left out: the
weight buffer (a RAM kept as a macro, not yet counted: the MPU reads ``lanes`` weight rows a
cycle through as many ports, the INT8 array one, so leaving it out favours DSTAR), the QPU that
makes the MPU's stream (DSTAR's alone), the clock tree and wires (pre-layout), glitches
(zero-delay simulation).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.golden.config import Config

__all__ = ["workload", "array_energy", "precision_sweep", "power"]

UNITS = ("mpu", "baseline")
#: Steps of the float DDIM run whose layer inputs the workload takes its steps from.
TRACE_STEPS = 10


def workload(cfg: Config, *, weights: str = "trained", model: str = "digits", steps=(1,),
             quick: bool = True, layers=None, progress=None) -> tuple:
    """``(bench layers, description)``: ``dstar bench``'s layers of one block at ``steps``
    (``quick``: its reduced tokens and output channels), only the kinds in ``layers`` if
    given."""
    from dstar_rtl.bench.layers import load_inputs, prepare
    layers_in, trace, desc = load_inputs(cfg, weights=weights, model=model, steps=TRACE_STEPS,
                                         progress=progress)
    if layers is not None:
        layers_in = [ls for ls in layers_in if ls.kind in layers]
        if not layers_in:
            raise ValueError(f"layers: none of {sorted(layers)} is in the model")
    bl = prepare(cfg, layers_in, trace, list(steps), quick)
    desc = dict(desc, steps_run=list(steps), quick=quick,
                layers=[dict(id=b.id, kind=b.kind, tokens=b.tokens, cin=b.cin, cout=b.cout)
                        for b in bl])
    return bl, desc


def macs(layers) -> int:
    """The MACs of the bench layers: ``tokens · cin · cout`` each."""
    return sum(b.tokens * b.cin * b.cout for b in layers)


def array_energy(unit: str, cfg: Config, doc: dict, liberty, *, clock_ns: float = 1.0,
                 tag: str = "power", progress=None) -> dict:
    """Energy of ``unit`` (``"mpu"``, ``"baseline"``) at its bench configuration on the
    workload ``doc`` (``tb/test_bench_layers.py``'s, :func:`bench.layers.workload_doc`;
    module docstring): :func:`bench.unit_power.unit_energy` on that testbench, its data
    energy per group streamed, with the bench's own record (stream cycles, drain beats
    checked)."""
    from dstar_rtl.bench.unit_power import unit_energy

    with tempfile.TemporaryDirectory(prefix="dstar-power-") as d:
        wl, res = Path(d) / "workload.json", Path(d) / "result.json"
        wl.write_text(data_json(doc))
        out = {}

        def groups(_):
            out.update(json.loads(res.read_text()))
            return dict(groups=sum(x["input_beats"] for x in out["layers"]))

        r = unit_energy(unit, cfg, liberty, "dstar_rtl.tb.test_bench_layers",
                        {"DSTAR_BENCH_WORKLOAD": str(wl), "DSTAR_BENCH_RESULT": str(res)},
                        groups, clock_ns, tag, progress)
    return dict(unit=unit, config_hash=r["config_hash"], area_um2=r["area_um2"],
                cells=r["cells"], library=r["library"], workdir=r["workdir"],
                run_cycles=r["run_cycles"], stream_cycles=out["cycles"],
                drain_beats_checked=out["drain_beats_checked"], checked=out["checked"],
                energy=r["energy"], transitions=r["transitions"],
                idle_fj_per_cycle=r["idle_fj_per_cycle"], groups=r["events"]["groups"],
                data_fj=r["data_fj"], data_fj_per_group=r["data_fj_per_event"]["groups"])


def precision_sweep(cfg: Config, liberty, *, precisions=(2, 4, 6, 8), tiles: int = 8,
                    seed: int = 0, clock_ns: float = 1.0, progress=None) -> dict:
    """pJ per MAC of the MPU on random tiles whose every sub-channel is at one precision
    (:func:`golden.vectors.precision_workload`: ``tiles`` tiles of ``max_reduction``
    channels, one block of weights), and of the INT8 array on uniform 8-bit tiles of the same
    shape: ``{"dstar": {bits: pJ/MAC}, "int8": {8: pJ/MAC}, "macs", "tiles", "channels"}``."""
    import numpy as np

    from dstar_rtl.bench.resources import unit_config
    from dstar_rtl.golden.vectors import baseline_workload, precision_workload

    say = progress or (lambda msg: None)
    C = cfg.max_reduction
    n = tiles * cfg.tile * C * cfg.cols
    out = {"dstar": {}, "int8": {}, "macs": n, "tiles": tiles, "channels": C, "runs": {}}
    for unit, bits in [("mpu", b) for b in precisions] + [("baseline", None)]:
        ucfg, rng = unit_config(unit, cfg), np.random.default_rng(seed)
        # Both draw the weights first from the same seed: the same W on both arrays.
        w = (precision_workload(ucfg, rng, bits, tiles, C) if bits
             else baseline_workload(ucfg, rng, tiles, C))
        name = f"{bits}-bit" if bits else "int8"
        doc = dict(unit=unit, layers=[dict(id=name, stream=w.words, blocks=[
            dict(W=np.asarray(w.W).tolist(), expected=w.expected)])])
        r = array_energy(unit, cfg, doc, liberty, clock_ns=clock_ns, tag=f"power-{name}",
                         progress=say)
        t = r["energy"]["total"]
        pj = (t["internal"] + t["switching"] + t["leakage"]) / 1e3 / n
        out["dstar" if unit == "mpu" else "int8"][str(bits or 8)] = pj
        out["runs"][name] = dict(run_cycles=r["run_cycles"], stream_cycles=r["stream_cycles"],
                                 drain_beats_checked=r["drain_beats_checked"],
                                 checked=r["checked"], total=t)
        say(f"{unit} {name}: {pj:.3f} pJ/MAC")
    return out


def _group(parts: dict) -> dict:
    """Parts grouped: every PE as ``pes``, the rest of the array as ``array``, the unit's own
    logic (front end, weight buffer ports) as ``front end``, the input nets as ``inputs``."""
    out = {}
    for name, p in parts.items():
        key = ("pes" if ".pe_" in f".{name}" else "array" if name.startswith("array")
               else "inputs" if name == "inputs" else "front end")
        g = out.setdefault(key, dict(internal=0.0, switching=0.0, leakage=0.0, cells=0,
                                     sequential=0.0))
        for k in g:
            g[k] += p[k]
    return out


#: What :func:`pe_energies` keeps of each PE's :func:`bench.unit_power.pe_energy`.
_PE_KEEP = ("unit", "preset", "config_hash", "cells", "area_um2", "run_cycles", "events",
            "total", "total_fj", "idle_fj_per_cycle", "data_fj", "pj_per_mac", "workload",
            "seconds")


def pe_energies(cfg: Config, liberty, *, clock_ns: float = 1.0, progress=None) -> dict:
    """One PE of each kind alone (:func:`bench.unit_power.pe_energy`: dense random
    operands, every output checked) at the ``tiny`` preset and at ``cfg``:
    ``{preset name: {"slice": {...}, "int8": {...}}}``."""
    from dstar_rtl.bench.unit_power import pe_energy
    from dstar_rtl.golden.config import preset

    out = {}
    for name, c in {"tiny": preset("tiny"), cfg.name: cfg}.items():
        out[name] = {}
        for kind in ("slice", "int8"):
            r = pe_energy(c, liberty, kind, clock_ns=clock_ns, progress=progress)
            out[name][kind] = {k: r[k] for k in _PE_KEEP}
    return out


def power(cfg: Config, liberty, *, weights: str = "trained", model: str = "digits",
          steps=(1,), quick: bool = True, layers=None, clock_ns: float = 1.0,
          sweep: bool = True, progress=None) -> dict:
    """The arrays' measurement (module docstring); returns ``reports/energy.json``'s content
    but the energy per image (:func:`bench.image_energy.per_image`)."""
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    bl, desc = workload(cfg, weights=weights, model=model, steps=steps, quick=quick,
                        layers=layers, progress=say)
    n = macs(bl)
    say(f"workload: {len(bl)} layers, {n:,} MACs")
    from dstar_rtl.bench.layers import workload_doc
    arrays = {}
    for unit in UNITS:
        r = array_energy(unit, cfg, workload_doc(bl, unit), liberty, clock_ns=clock_ns,
                         progress=say)
        tot = r["energy"]["total"]
        fj = tot["internal"] + tot["switching"] + tot["leakage"]
        r.update(energy_fj=fj, pj_per_mac=fj / 1e3 / n,
                 by_group=_group(r["energy"]["parts"]))
        arrays[unit] = r
        say(f"{unit}: {fj / 1e3:,.1f} pJ, {r['pj_per_mac']:.3f} pJ/MAC")
    prec = precision_sweep(cfg, liberty, clock_ns=clock_ns, progress=say) if sweep else None
    pes = pe_energies(cfg, liberty, clock_ns=clock_ns, progress=say) if sweep else None
    pj = {"dstar": {"trained_tiles": arrays["mpu"]["pj_per_mac"]},
          "int8": {"trained_tiles": arrays["baseline"]["pj_per_mac"]}}
    if prec:
        for side in ("dstar", "int8"):
            pj[side].update(prec[side])
    rep = dict(
        generated=time.strftime("%Y-%m-%d %H:%M"), preset=cfg.name, config_hash=cfg.hash(),
        clock_ns=clock_ns, workload=dict(desc, macs=n), arrays=arrays, precision_sweep=prec,
        pes=pes, pj_per_mac=pj,
        ratio_dstar_over_int8=arrays["mpu"]["pj_per_mac"] / arrays["baseline"]["pj_per_mac"])
    rep["runtime_s"] = round(time.perf_counter() - t0, 1)
    return rep
