"""Energy per image of a whole core: each part's measured energies times the image's events.

For one image of the digits DiT (20 DDIM steps) on the DSTAR ``fpga`` core and on the INT8 core
of the whole-core comparison (:func:`bench.compare.fpga_config`), the energy is the sum of

- **idle energy** of every part: the core's Nangate45 netlist (:func:`flows.synth.synthesize`,
  ``asic``, the whole-core options :data:`flows.core_parts.ASIC_OPTIONS`), one clock
  cycle in which only the clock moves (:func:`flows.power.clock_energy`: flip-flop clock pins,
  the clock net's ``½·C·V²``, leakage), by part, times the image's RTL cycles (no clock gating,
  as the RTL is);
- **data energy** of the units measured at gate level on real inputs, per event: the array
  (the MPU or the INT8 array) per group replayed (``groups_replayed``), the QPU per sub-channel
  quantized (``qpu_subchannels``), the VPU per input beat of its own commands
  (``vpu_beats`` less the ``acc_requant`` beats the M engine's requantizer runs, one per
  RBUF read); each unit's data energy is its gate-level run's energy less its own idle energy
  over the run's cycles (:mod:`bench.unit_power`);
- **SRAM energy** per access (:mod:`perf.sram_energy`) of each RAM the synthesis keeps as a
  macro, times the image's accesses: the core's row counters and the executor's memory reads
  (:mod:`bench.image_events`); an ABUF row access is one access of each of its ``T``
  banks.

Left out, and on which side it falls: the data energy of the dispatcher, the engines, the
requantizers and the INT8 core's quantizer (their clock and leakage are counted; the INT8
quantizer's data energy favours INT8, the rest is nearly the same logic on both cores); the
small FIFOs' RAMs (a few entries); the host link and the host's words; the clock tree and wires
(pre-layout); glitches (zero-delay simulation). Init (weights, RBUF, masks loaded once) is not
part of an image.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from dstar_rtl.gen.outputs import data_json
from dstar_rtl.perf.sram_energy import sram_energy

__all__ = ["core_idle", "image_energy", "fpga_images", "levers", "floors",
           "per_image", "IMAGE", "UNIT_EVENTS", "CLOCK_PART"]

#: The part the clock net's ``½·C·V²`` (an ideal net to every flip-flop's clock pin) is charged
#: to, with the core's other input ports (which hold still in an idle cycle).
CLOCK_PART = "clock net (no tree)"

#: The image :func:`per_image` measures: DDIM steps, label and seed of the digits DiT.
IMAGE = dict(steps=20, label=0, seed=0)

#: The event each measured unit's data energy is charged per, and how an image's count of it
#: comes from its counters and reads.
UNIT_EVENTS = {
    "array": ("groups_replayed", lambda c, r: c["groups_replayed"]),
    "qpu": ("qpu_subchannels", lambda c, r: c["qpu_subchannels"]),
    "vpu": ("vpu_beats", lambda c, r: c["vpu_beats"] - r["rbuf_reads"]),
}


def core_idle(cfg, liberty, *, clock_ns: float = 1.0, progress=None) -> dict:
    """``{"fj_per_cycle": {part: fJ}, "leakage_fj_per_cycle", "voltage", "cells", "area_um2",
    "parts_um2", "memories", "workdir"}``: one idle cycle of the whole core by part
    (:data:`flows.core_parts.PARTS`), with the part areas and the RAMs; the cycle's
    energy is kept beside the netlist (``idle-<clock>ns.json``, with the netlist's digest)."""
    from dstar_rtl.flows.core_parts import ASIC_OPTIONS, core_area, part_of
    from dstar_rtl.flows.liberty import read_liberty
    from dstar_rtl.flows.power import PARTS_INPUTS, clock_energy
    from dstar_rtl.flows.synth import synthesize

    say = progress or (lambda msg: None)
    syn = synthesize("core", cfg, "asic", liberty=liberty, **ASIC_OPTIONS, reuse=True)
    wd = Path(syn["workdir"])
    say(f"core {cfg.datapath}: netlist {syn['num_cells']:,} cells "
        f"({'stored' if syn.get('reused') else 'synthesized'})")
    top = syn["top"]
    text = (wd / "netlist.json").read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    stored = wd / f"idle-{clock_ns:g}ns.json"
    e = json.loads(stored.read_text()) if stored.is_file() else None
    if e is None or e.get("netlist_sha256") != digest:
        net = json.loads(text)
        clk = net["modules"][top]["ports"]["clk"]["bits"][0]
        e = clock_energy(net, read_liberty(wd / "cells.lib"), clk, clock_ns, top)
        stored.write_text(data_json(dict(e, netlist_sha256=digest)))
    per, leak = {}, {}
    for path, p in e["parts"].items():
        name = (CLOCK_PART if path == PARTS_INPUTS else
                part_of(f"{top}.{path}", top) if path != "top" else part_of(top, top))
        per[name] = per.get(name, 0.0) + p["internal"] + p["switching"] + p["leakage"]
        leak[name] = leak.get(name, 0.0) + p["leakage"]
    area = core_area(syn)
    return dict(fj_per_cycle=per, leakage_fj_per_cycle=leak, voltage=e["voltage"],
                cells=syn["num_cells"],
                area_um2=area["cells_um2"], parts_um2=area["parts"],
                memories=area["memories"], workdir=str(wd))


def image_energy(*, cycles: int, idle: dict, units: dict, counters: dict, reads: dict,
                 voltage: float) -> dict:
    """Energy of one image in pJ by part: ``idle`` (:func:`core_idle`) times ``cycles``, each
    unit of ``units`` (``{"array"|"qpu"|"vpu": {"fj_per_event"}}``) times its event count
    (:data:`UNIT_EVENTS`), the SRAMs (:func:`sram_energy`). Returns ``{"parts": {name: pJ},
    "idle_pj", "data_pj", "sram", "total_pj", "events"}``."""
    parts = {f"idle: {k}": v * cycles / 1e3 for k, v in idle["fj_per_cycle"].items()}
    events = {}
    for unit, rec in units.items():
        name, count = UNIT_EVENTS[unit]
        n = count(counters, reads)
        events[unit] = dict(event=name, count=n, fj_per_event=rec["fj_per_event"])
        parts[f"data: {unit}"] = n * rec["fj_per_event"] / 1e3
    sram = sram_energy(idle["memories"], {**counters, **reads}, voltage)
    parts.update({f"sram: {k}": v for k, v in sram["by_buffer"].items()})
    idle_pj = sum(v for k, v in parts.items() if k.startswith("idle: "))
    data_pj = sum(v for k, v in parts.items() if k.startswith("data: "))
    return dict(parts=parts, idle_pj=idle_pj, data_pj=data_pj, sram_pj=sram["total_pj"],
                sram=sram, total_pj=idle_pj + data_pj + sram["total_pj"], events=events,
                cycles=cycles)


def fpga_images(liberty, units: dict, *, steps: int = 20, label: int = 0, seed: int = 0,
                simulator: str = "verilator", clock_ns: float = 1.0, progress=None) -> dict:
    """One image of the trained digits DiT on each ``fpga`` core of the whole-core comparison
    (module docstring), DSTAR and INT8: the image sampled on the RTL (every step checked
    against the integer golden; its cycles), the same image on the executor (its events; the
    event counters checked equal to the core's), the core's idle energy by part, and
    ``units`` (``{"mpu"|"baseline"|"qpu"|"vpu": {"fj_per_event"}}``, measured at gate level).
    Returns ``{"dstar": {...}, "int8": {...}}`` with :func:`image_energy`'s record each."""
    import time

    from dstar_rtl.bench.compare import fpga_config
    from dstar_rtl.bench.image_events import check_against_rtl, image_events
    from dstar_rtl.bench.sample import run_samples
    from dstar_rtl.models.digits import load_trained

    say = progress or (lambda msg: None)
    spec, params = load_trained()
    out = {}
    for dp in ("dstar", "int8"):
        t0 = time.perf_counter()
        cfg = fpga_config(dp, spec, params)
        rec = run_samples(spec, params, cfg, backend=simulator, steps=steps, labels=[label],
                          guidance=1.0, seed=seed)["record"]
        per_step = rec["samples"][0]["per_step"]
        cycles = sum(s["core_counters"]["cycles"] for s in per_step)
        say(f"{dp} core: one image on the {simulator} RTL, {cycles:,} cycles, bit-exact")
        ev = image_events(spec, params, cfg, steps=steps, label=label, seed=seed)
        checked = check_against_rtl(ev, per_step)
        say(f"{dp} core: the executor's events of the image equal the core's counters "
            f"({checked:,} values)")
        idle = core_idle(cfg, liberty, clock_ns=clock_ns, progress=say)
        use = {"array": units["mpu" if dp == "dstar" else "baseline"], "vpu": units["vpu"]}
        if dp == "dstar":
            use["qpu"] = units["qpu"]
        e = image_energy(cycles=cycles, idle=idle, units=use, counters=ev["counters"],
                         reads=ev["reads"], voltage=idle["voltage"])
        busy = {k: sum(s["core_counters"][k] for s in per_step)
                for k in ("busy_H", "busy_Q", "busy_M", "busy_V")}
        out[dp] = dict(e, config_hash=cfg.hash(), cells=idle["cells"],
                       area_um2=idle["area_um2"], parts_um2=idle["parts_um2"],
                       idle_fj_per_cycle=idle["fj_per_cycle"],
                       leakage_fj_per_cycle=idle["leakage_fj_per_cycle"], voltage=idle["voltage"],
                       counters=ev["counters"], reads=ev["reads"],
                       busy=busy, counters_checked=checked,
                       psnr_db=rec["samples"][0]["psnr_db"],
                       seconds=round(time.perf_counter() - t0, 1))
        say(f"{dp} core: {e['total_pj'] / 1e6:.3f} uJ per image")
    return out


#: The engine whose busy cycles each part's clock would follow under clock gating (parts not
#: listed are never gated: the dispatcher, the top, ABUF's ports).
_ENGINE_OF = {"array PEs": "M", "array skew and drain": "M", "array front end": "M",
              "M requantizer": "M", "M engine": "M", "QPU sorter": "Q", "QPU packer": "Q",
              "QPU front (max, bins, slices, chunks)": "Q", "Q engine": "Q", "VPU": "V",
              "V engine": "V", "H engine": "H"}


def levers(core: dict, cfg, int8_wmem_reads: int | None = None) -> dict:
    """Energy per image (pJ) a lever would save on one core's image (:func:`fpga_images`'
    record), by the same energies, for levers **not built** (what each would buy, to choose
    among them):

    - ``clock_gating``: each engine's parts clocked only while the engine is busy (its
      ``busy_E`` cycles) saves their idle energy but leakage over the other cycles;
    - ``gmem_split``: the linear layers' double-buffered group slots (``2 · 4 · max_reduction``
      rows) in their own small SRAM, the P cache in the large one: every group read and write
      but the P cache's at the small SRAM's energy;
    - ``weight_buffer`` (DSTAR): a weight buffer of one GEMM's ``max_reduction`` rows beside
      the array, filled once per GEMM from WMEM (as many WMEM reads as the INT8 core's, which
      reads each channel's row once per GEMM: ``int8_wmem_reads``), the MPU's ``lanes`` reads
      per group from it.
    """
    from dstar_rtl.perf.sram_energy import sram_read_pj, sram_write_pj

    V, out = core["voltage"], {}
    cyc = core["cycles"]
    gate = 0.0
    for part, fj in core["idle_fj_per_cycle"].items():
        e = _ENGINE_OF.get(part)
        if e:
            clocked = fj - core["leakage_fj_per_cycle"].get(part, 0.0)
            gate += clocked * (cyc - core["busy"][f"busy_{e}"]) / 1e3
    out["clock_gating"] = gate
    mems = {m["name"]: m for m in core["sram"]["rams"]}
    g = mems.get("gmem")
    if g:
        slots = 2 * 4 * cfg.max_reduction
        c = core["counters"]
        reads = core["reads"]["gmem_reads"] - c["pcache_groups_read"]
        writes = c["gmem_writes"] - c["pcache_groups_written"]
        out["gmem_split"] = (reads * (g["read_pj"] - sram_read_pj(g["width"], slots, V))
                             + writes * (g["write_pj"] - sram_write_pj(g["width"], slots, V)))
    w = mems.get("weights")
    if w and int8_wmem_reads is not None and cfg.datapath == "dstar":
        now = w["reads"] * w["read_pj"]
        small = sram_read_pj(w["width"], cfg.max_reduction, V)
        fill = int8_wmem_reads * (w["read_pj"] + sram_write_pj(w["width"], cfg.max_reduction, V))
        out["weight_buffer"] = now - (fill + w["reads"] * small)
    return out


def _movable(parts: dict, *, weights: float) -> float:
    """``parts`` (``{part: pJ}``) without idle energy and the group memory, the weights' SRAM
    at ``weights`` pJ."""
    keep = sum(v for k, v in parts.items()
               if not (k == "idle" or k.startswith("idle: ")) and k not in
               ("sram: gmem", "sram: weights"))
    return keep + weights


def floors(dstar: dict, int8: dict, int8_total: float) -> dict:
    """Lower bounds on DSTAR/INT8 energy per image that no lever of :func:`levers` (built or
    not) can get under, from one image's parts on each side (``{part: pJ}``: a core's of
    :func:`fpga_images` or a projected chip's of :mod:`perf.chip_energy`) and the
    INT8 side's total:

    - ``one_sided``: DSTAR with no idle energy at all (perfect clock gating and no leakage),
      its group memory free and its weight reads costing the INT8 side's (a weight buffer
      whose own reads are free), against the INT8 side as measured: every lever to DSTAR,
      none to INT8;
    - ``symmetric``: the same DSTAR against the INT8 side under the same rules (no idle, the
      group memory free), as the fair-comparison rule asks: the baseline gets every lever the
      generator could give DSTAR.

    Neither drops what the levers do not touch: the array's, QPU's and VPU's data energy per
    event, the state and operand buffers (XBUF, YBUF, ABUF, RBUF, VBUF, masks), HBM."""
    w = int8.get("sram: weights", 0.0)
    low = _movable(dstar, weights=w)
    return dict(dstar_floor_pj=low, one_sided=low / int8_total,
                symmetric=low / _movable(int8, weights=w))


def per_image(cfg, liberty, arrays: dict, *, clock_ns: float, progress=None) -> dict:
    """The energy per image (this module on the ``fpga`` cores,
    :mod:`perf.chip_energy` on the projection's models) with the QPU and the VPU
    measured at gate level (:mod:`bench.unit_power`): the ``units``, ``image``,
    and ``qpu_power_share`` entries of ``reports/energy.json`` (the application adds the paper
    chip's, :func:`app.reports.energy_image.paper_chip_entries`)."""
    from dstar_rtl.bench.unit_power import dit_tiles, qpu_energy, vpu_energy
    from dstar_rtl.flows.core_parts import QPU_PARTS
    from dstar_rtl.golden.config import preset
    from dstar_rtl.perf.sram_energy import SOURCES

    say = progress or (lambda msg: None)
    tiles, qdesc = dit_tiles(cfg, steps=(1, 2), progress=say)
    qpu = qpu_energy(cfg, liberty, tiles, qdesc, clock_ns, progress=say)
    vpu = vpu_energy(cfg, liberty, rows=6, clock_ns=clock_ns, progress=say)
    fj = {"mpu": dict(fj_per_event=arrays["mpu"]["data_fj_per_group"]),
          "baseline": dict(fj_per_event=arrays["baseline"]["data_fj_per_group"]),
          "qpu": dict(fj_per_event=qpu["data_fj_per_event"]["subchannels"]),
          "vpu": dict(fj_per_event=vpu["data_fj_per_event"]["in_beats"])}
    cores = fpga_images(liberty, fj, **IMAGE, clock_ns=clock_ns, progress=say)
    d = cores["dstar"]
    qpu_pj = sum(v for k, v in d["parts"].items()
                 if k in {f"idle: {p}" for p in QPU_PARTS} or k == "data: qpu")
    logic = d["idle_pj"] + d["data_pj"]
    lv = {side: levers(c, preset("fpga", datapath=side), cores["int8"]["reads"]["wmem_reads"])
          for side, c in cores.items()}
    i8 = cores["int8"]
    image = dict(cores=cores, **IMAGE, sram_source=SOURCES["sram"],
                 qpu_power_share=qpu_pj / d["total_pj"], qpu_logic_share=qpu_pj / logic,
                 levers=lv, floors=floors(d["parts"], i8["parts"], i8["total_pj"]),
                 vpu_run=f"{vpu['events']['in_beats']:,} input beats in "
                                    f"{vpu['run_cycles']:,} cycles")
    keep = ("cells", "area_um2", "run_cycles", "events", "total_fj", "idle_fj_per_cycle",
            "data_fj", "data_fj_per_event", "parts", "workload", "seconds", "testbench",
            "unbounded")
    rep = dict(units={"qpu": {k: qpu[k] for k in keep}, "vpu": {k: vpu[k] for k in keep}},
               image=image, qpu_power_share=image["qpu_power_share"])
    return rep
