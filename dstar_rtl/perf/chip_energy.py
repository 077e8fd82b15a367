"""Projected energy per image of the paper's chip (32 cores of the ``paper`` configuration) on
the projection's models, DSTAR against the same chip with INT8 cores and against an A100.

Events per image come from the projection's work rules (:mod:`perf.chip_model`: every
layer's token tiles, column blocks and groups at the workload's bits and lane fill, attention's
query tiles and kept key blocks, the SAR cache and reuse steps, the block's element-wise rows),
counted the way the core counts them (program/executor.py's counter rules and memory reads).
Energies per event are the ``fpga`` core's, measured at gate level, carried to the ``paper``
core by what one event touches there:

- **data**: the array per group × ``(rows · cols)`` of ``paper`` over ``fpga`` (a group feeds
  every PE once); the QPU per sub-channel × ``T`` over ``T`` (its elements); the VPU per beat ×
  ``vpu_lanes`` over ``vpu_lanes``;
- **idle** (clock and leakage, no clock gating): each part's idle energy per µm² of the ``fpga``
  core × that part's area on the ``paper`` core by the part-area model of the whole-core
  comparison (``reports/compare.json``), every core every cycle of the image;
- **SRAM**: each buffer's accesses × its per-access energy (:mod:`perf.sram_energy`) at its
  row width in a bank of the chip's buffer (:attr:`perf.chip_memory.MemorySystem.bank_bytes`:
  the paper's 80 KB per core banked in 8 KB macros, not the ``paper`` core's RTL depths), the
  running sums read and written once per reduction piece the projection chose; every byte
  HBM delivers or takes (but the weights, whose writes WMEM counts) once more, written into or
  read out of a bank;
- **HBM**: the projection's traffic by kind (weights, activations, FMDQ's state, the GEMM
  traffic a small buffer adds, K/V operands, the P cache; :func:`perf.chip_model.
  project_model`) at 3.97 pJ/bit.

Not modelled: the network between cores, the scratchpad's own accesses, the host. The A100 is
charged its board power (:data:`models.published.A100_40GB`) over its roofline time per image
(:mod:`perf.gpu_bound`), a bound in the GPU's favour on time; beside the 45 nm figures, the
chip's energy carried to the A100's 7 nm by :data:`SCALE_7NM` (logic and SRAM apart, HBM
unscaled).
"""

from __future__ import annotations

import math

from dstar_rtl.golden.config import Config
from dstar_rtl.models.published import DEEPSCALE_7NM, JOUPPI_7NM
from dstar_rtl.perf.gpu_bound import A100

__all__ = ["step_events", "image_events", "core_memories", "chip_energy", "idle_per_cycle",
           "fpga_side", "row_energy", "project_energy", "at_7nm", "SCALE_7NM",
           "SCALE_DEEPSCALE", "SCALE_SOURCE"]


#: 45 nm → 7 nm energy factors (the A100's node), logic and SRAM apart: Jouppi et al., ISCA 2021
#: (TPUv4i), Table 3's ranges, the middle of each (multipliers 2.1-3.2× less energy for logic,
#: SRAM 1.3-2.4×); HBM is not scaled (the same memory at either node). The paper scaled by
#: DeepScaleTool (Sarangi and Baas, ISCAS 2021), whose 0.2473 for power at equal frequency is
#: second-hand (``SCALE_DEEPSCALE``).
SCALE_7NM = {k: 1 / round(sum(JOUPPI_7NM[k]) / 2, 6) for k in ("logic", "sram")} | {"hbm": 1.0}
SCALE_DEEPSCALE = DEEPSCALE_7NM["power"]
SCALE_SOURCE = (f"{JOUPPI_7NM['source']}: multipliers "
                + "-".join(f"{v:g}" for v in JOUPPI_7NM["logic"]) + "x and SRAM "
                + "-".join(f"{v:g}" for v in JOUPPI_7NM["sram"])
                + "x less (middle of each range taken); HBM unscaled")


def at_7nm(parts: dict) -> float:
    """pJ of an image's ``parts`` (:func:`chip_energy`'s) carried to 7 nm by
    :data:`SCALE_7NM`: ``idle`` and ``data`` parts as logic, ``sram`` parts as SRAM, ``hbm``
    unscaled."""
    kind = {"idle": "logic", "data": "logic", "sram": "sram", "hbm": "hbm"}
    return sum(v * SCALE_7NM[kind[k.split(":")[0]]] for k, v in parts.items())


def _add(ev: dict, **k):
    for name, v in k.items():
        ev[name] = ev.get(name, 0) + v


def step_events(model, cfg: Config, wl, side: str, cache: bool, cores: int,
                pieces: dict | None = None) -> dict:
    """Events of one step of ``model`` over the whole chip (module docstring). ``side``:
    ``"dstar"`` (``wl``'s bits and fill; differential layers) or ``"int8"`` (dense, one group
    per channel, P at 8 bits); ``pieces``: each layer's reduction pieces (the projection's
    ``reduction_pieces``; 1 when not given): a GEMM per piece, the running sums (DSTAR's ``Y``,
    the INT8 core's partial sums after the first piece) read and written by each."""
    from dstar_rtl.perf.chip_model import _groups, vector_rows

    T, ev = cfg.tile, {}
    dstar = side == "dstar"
    ports = cfg.lanes if dstar else 1
    p_bits = wl.p_bits if dstar else 8.0

    def groups(nch, bits):
        return _groups(nch, bits, cfg, wl.fill) if dstar else nch

    for x in model.linears:
        if x.cache_only and not cache:
            continue
        nt, nb = math.ceil(x.tokens / T), math.ceil(x.cout / T)
        g = groups(x.cin, wl.bits)
        p = (pieces or {}).get(x.name, 1)
        n_gemm, n_sub = x.count * nt * nb, x.count * nt * x.cin
        _add(ev, groups_replayed=n_gemm * g, qpu_subchannels=n_sub,
             gmem_writes=x.count * nt * g, gmem_reads=n_gemm * g, wmem_reads=n_gemm * g * ports,
             abuf_reads=n_sub * (1 if dstar else 2), abuf_writes=n_gemm * T * p,
             rbuf_reads=n_gemm * T * p,
             wmem_writes=x.count * x.cin * nb * min(cores, nt))
        sums = n_gemm * T * (p if dstar else p - 1)
        if sums:
            _add(ev, ybuf_reads=sums, ybuf_writes=sums)
        if dstar:
            _add(ev, xbuf_reads=n_sub, xbuf_writes=n_sub)
    for a in model.attentions:
        nq, nk = math.ceil(a.queries / T), math.ceil(a.keys / T)
        kept = max(1, round(nk * wl.kept))
        units = a.count * a.seqs * a.heads * nq
        heads = a.count * a.seqs * a.heads
        d_blocks = math.ceil(a.head_dim / T)
        g_p = groups(kept * T, p_bits)
        vpu = 0
        # K and V into WMEM (kv_amax and kv_quant; K by sub-channels on cache steps).
        kv = (2 * nk * a.head_dim if cache else 0) + nk * a.head_dim + a.keys * d_blocks
        vpu += heads * kv
        _add(ev, wmem_writes=heads * ((nk * a.head_dim if cache else 0) + a.keys * d_blocks))
        if cache:
            g_q = groups(a.head_dim, wl.bits)
            s_gemm = units * kept
            _add(ev, qpu_subchannels=units * (a.head_dim + nk * T),
                 gmem_writes=units * (g_q + g_p), groups_replayed=s_gemm * g_q,
                 gmem_reads=s_gemm * g_q, wmem_reads=s_gemm * g_q * ports,
                 abuf_reads=units * (a.head_dim + nk * T) * (1 if dstar else 2)
                 + units * T * nk, abuf_writes=s_gemm * T + units * T * nk,
                 rbuf_reads=s_gemm * T)
            vpu += units * T * nk                                  # softmax rows
        pv = units * d_blocks
        _add(ev, groups_replayed=pv * g_p, gmem_reads=pv * g_p, wmem_reads=pv * g_p * ports,
             abuf_writes=pv * T, rbuf_reads=pv * T)
        _add(ev, vpu_beats=vpu, vbuf_reads=2 * vpu, mask_reads=vpu, abuf_reads=vpu)
    for count, tokens, ops in vector_rows(model):
        for op, n, k in ops:
            beats = count * tokens * k * math.ceil(n / T)
            _add(ev, vpu_beats=beats, vbuf_reads=2 * beats, mask_reads=beats, abuf_writes=beats,
                 abuf_reads=beats * (2 if op == "gated_residual" else 1))
    return ev


def image_events(model, cfg: Config, wl, side: str, cores: int,
                 pieces: dict | None = None) -> dict:
    """:func:`step_events` over an image: ``ceil(steps / interval)`` cache steps, the rest
    reuse steps."""
    n_cache = math.ceil(model.steps / wl.interval)
    out = {}
    for cache, n in ((True, n_cache), (False, model.steps - n_cache)):
        for k, v in step_events(model, cfg, wl, side, cache, cores, pieces).items():
            out[k] = out.get(k, 0) + n * v
    return out


def core_memories(cfg: Config, bank_bytes: int) -> list:
    """The buffers of one core of ``cfg`` as the energy model sees them: ``{"module", "name",
    "width", "size"}``, each a ``bank_bytes`` bank of its row width (the chip's unified buffer
    banked, :class:`perf.chip_memory.MemorySystem`; ABUF as its ``T`` banks of one element
    each); the running sums at the accumulator's width on the INT8 core (its partial sums)."""
    from dstar_rtl.golden.layouts import gmem_layout, layout_width
    from dstar_rtl.program.isa import row_width

    def rows(width):
        return max(1, bank_bytes * 8 // width)

    mems = [dict(module="core.abuf", name=f"bank{k}", width=cfg.act_width,
                 size=rows(cfg.act_width)) for k in range(cfg.tile)]
    for b in ("XBUF", "YBUF", "RBUF", "VBUF", "MASK"):
        w = cfg.tile * cfg.baseline_acc_width if b == "YBUF" and cfg.datapath == "int8" \
            else row_width(cfg, b)
        mems.append(dict(module="core", name=b.lower(), width=w, size=rows(w)))
    mems.append(dict(module="core.matrix.mpu", name="weights", width=cfg.cols * 8,
                     size=rows(cfg.cols * 8)))
    w = layout_width(gmem_layout(cfg))
    mems.append(dict(module="core", name="gmem", width=w, size=rows(w)))
    return mems


def chip_energy(events: dict, *, cores: int, cycles: float, idle_fj_per_cycle: float,
                fj_per_event: dict, memories: list, voltage: float, hbm_bytes: dict,
                bank_bytes: int) -> dict:
    """pJ of one image: idle (every core, every cycle), data (``fj_per_event``: ``{"array",
    "qpu", "vpu"}`` at this configuration), SRAM (:func:`perf.sram_energy.
    sram_energy` on ``memories``), HBM traffic (``hbm_bytes``: the projection's by kind) and its
    staging through a ``bank_bytes`` bank (module docstring). Returns ``{"parts",
    "total_pj"}``."""
    from dstar_rtl.perf.sram_energy import HBM_PJ_PER_BIT, sram_energy, sram_read_pj, sram_write_pj

    parts = {"idle": idle_fj_per_cycle * cycles * cores / 1e3,
             "data: array": events["groups_replayed"] * fj_per_event["array"] / 1e3,
             "data: vpu": events["vpu_beats"] * fj_per_event["vpu"] / 1e3}
    if "qpu" in fj_per_event:
        parts["data: qpu"] = events["qpu_subchannels"] * fj_per_event["qpu"] / 1e3
    sram = sram_energy(memories, events, voltage)
    parts.update({f"sram: {k}": v for k, v in sram["by_buffer"].items()})
    staged = sum(v for k, v in hbm_bytes.items() if k != "weights") * 8
    per_bit = (sram_read_pj(64, bank_bytes // 8, voltage)
               + sram_write_pj(64, bank_bytes // 8, voltage)) / 2 / 64
    parts["sram: HBM staging"] = staged * per_bit
    parts.update({f"hbm: {k}": v * 8 * HBM_PJ_PER_BIT for k, v in hbm_bytes.items()})
    return dict(parts=parts, total_pj=sum(parts.values()))


def idle_per_cycle(fpga_idle: dict, fpga_parts_um2: dict, paper_parts_um2: dict) -> float:
    """fJ per cycle of one ``paper`` core holding still: each part's idle energy per µm² on the
    ``fpga`` core times its ``paper`` area (a part the ``fpga`` core lacks: the whole core's
    density); what belongs to no part (the clock net) grows with the whole core's area."""
    whole = sum(fpga_idle.values()) / sum(fpga_parts_um2.values())
    grow = sum(paper_parts_um2.values()) / sum(fpga_parts_um2.values())
    out = sum(v for k, v in fpga_idle.items() if k not in fpga_parts_um2) * grow
    for part, um2 in paper_parts_um2.items():
        a = fpga_parts_um2.get(part, 0.0)
        out += um2 * (fpga_idle.get(part, 0.0) / a if a > 0 and part in fpga_idle else whole)
    return out


def fpga_side(rep: dict) -> dict:
    """What :func:`project_energy` takes of the ``fpga`` cores from ``dstar power``'s report
    (``reports/energy.json``): per side ``{"idle", "parts_um2", "fj_per_event"}``, and the
    gate-level ``voltage``. Raises ``KeyError`` when the report lacks them."""
    cores = rep["image"]["cores"]
    fj_q = rep["units"]["qpu"]["data_fj_per_event"]["subchannels"]
    fj_v = rep["units"]["vpu"]["data_fj_per_event"]["in_beats"]
    out = {}
    for side, unit in (("dstar", "mpu"), ("int8", "baseline")):
        per_event = {"array": rep["arrays"][unit]["data_fj_per_group"], "vpu": fj_v}
        if side == "dstar":
            per_event["qpu"] = fj_q
        out[side] = dict(idle=cores[side]["idle_fj_per_cycle"],
                         parts_um2=cores[side]["parts_um2"], fj_per_event=per_event)
    return dict(sides=out, voltage=cores["dstar"]["voltage"])


def row_energy(row: dict, area_model: dict, fpga: dict, fpga_cfg: Config,
               voltage: float) -> dict:
    """Energy per image of one projected model (``row``: a row of ``reports/projection.json``,
    its ``config`` the ``paper`` configuration's overrides and ``memory`` the chip's memories)
    on the DSTAR chip and the INT8 chip, and the A100's. ``area_model``:
    ``reports/compare.json``'s ``paper.area_model`` (``{side: {"fit": {"predicted":
    {"parts"}}}}``); ``fpga``: per side ``{"idle": {part: fJ/cycle}, "parts_um2": {part: µm²},
    "fj_per_event": {"array", "qpu", "vpu"}}`` of the ``fpga`` cores (:func:`fpga_side`)."""
    from dstar_rtl.golden.config import preset
    from dstar_rtl.models.dit_shapes import MODELS
    from dstar_rtl.perf.chip_memory import MemorySystem
    from dstar_rtl.perf.chip_model import Chip, Workload

    chip = Chip(memory=MemorySystem(**row["memory"])) if "memory" in row else Chip()
    model = MODELS[row["model"]]
    wl = Workload(**row["workload"])
    rec = dict(model=row["model"], workload=wl.name, steps=model.steps)
    for side in ("dstar", "int8"):
        over = row.get("config", {}) if side == "dstar" else {}
        cfg = preset("paper", datapath=side, **over)
        f = fpga[side]
        scale = {"array": cfg.rows * cfg.cols / (fpga_cfg.rows * fpga_cfg.cols),
                 "qpu": cfg.tile / fpga_cfg.tile,
                 "vpu": cfg.vpu_lanes / fpga_cfg.vpu_lanes}
        per_event = {k: v * scale[k] for k, v in f["fj_per_event"].items()}
        idle = idle_per_cycle(f["idle"], f["parts_um2"],
                              area_model[side]["fit"]["predicted"]["parts"])
        n_cache = math.ceil(model.steps / wl.interval)
        r = row[side]
        hbm = {k: n_cache * v + (model.steps - n_cache) * r["reuse"]["hbm_bytes"][k]
               for k, v in r["cache"]["hbm_bytes"].items()}
        ev = image_events(model, cfg, wl, side, chip.cores, r.get("reduction_pieces"))
        bank = chip.memory.bank_bytes
        e = chip_energy(ev, cores=chip.cores, cycles=r["per_image_s"] * chip.freq_hz,
                        idle_fj_per_cycle=idle, fj_per_event=per_event,
                        memories=core_memories(cfg, bank), voltage=voltage,
                        hbm_bytes=hbm, bank_bytes=bank)
        rec[side] = dict(e, energy_j=e["total_pj"] * 1e-12, per_image_s=r["per_image_s"],
                         watts=e["total_pj"] * 1e-12 / r["per_image_s"],
                         energy_7nm_j=at_7nm(e["parts"]) * 1e-12,
                         idle_fj_per_core_cycle=idle, events=ev, hbm_bytes=hbm)
    gpu_s = row["gpu"]["per_image_s"]
    rec["a100"] = dict(energy_j=A100.watts * gpu_s, per_image_s=gpu_s, watts=A100.watts)
    rec["dstar_over_int8"] = rec["dstar"]["energy_j"] / rec["int8"]["energy_j"]
    rec["a100_over_dstar"] = rec["a100"]["energy_j"] / rec["dstar"]["energy_j"]
    rec["a100_over_dstar_7nm"] = rec["a100"]["energy_j"] / rec["dstar"]["energy_7nm_j"]
    return rec


def project_energy(rows: list, area_model: dict, fpga: dict, fpga_cfg: Config,
                   voltage: float) -> list:
    """:func:`row_energy` of every row of ``reports/projection.json``."""
    return [row_energy(row, area_model, fpga, fpga_cfg, voltage) for row in rows]
