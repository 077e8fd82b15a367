"""The design-space sweep (``dstar sweep``): area, throughput and throughput per µm² of the DSTAR
MPU and the INT8 baseline array over array size, lanes, PE stages and the datapath levers.

Configurations
--------------
The ``fpga`` preset (``max_reduction`` 256, ``sort_n`` 32) with ``rows = cols = n`` for every
size, and every combination of ``lanes``, ``pe_stages``, ``digit_product``, ``digits``, the
accumulator (``derived``: the width that cannot overflow; ``26``: ``acc_width=26`` with
``overflow_detect``, skipped where the derived width is not wider), ``weight_hop`` (``1``,
an integer ``k``, ``rows``: broadcast; capped at ``n``) and ``act_hop`` (``1``, ``k``,
``cols``: the row operand broadcast along the row; every value with every ``weight_hop``). The
INT8 baseline at every size with every ``pe_stages``, ``weight_hop`` and ``act_hop`` value,
with and without Yosys ``synth -booth``; its best (smallest) array is the comparison.

Area (µm² on the user's Liberty library; ``flows.synth.synthesize(..., "asic")``)
----------------------------------------------------------------------------------
- Every PE variant is synthesized flattened (``pe``; ``baseline_pe``), each with its column
  operand registered (``w_out``) and, where ``weight_hop > 1`` is swept, as a wire; likewise
  its row operand (``a_out``) where ``act_hop > 1`` is swept (up to four PEs per variant).
- The arrays are synthesized by part (PEs, the array's skew and drain chain, the front end;
  weight memory a macro, left out) at the ``measure`` sizes (4 and 8) for a subset: every
  datapath (``digit_product`` × ``digits`` × accumulator × ``weight_hop``) at the reference
  ``lanes``/``pe_stages`` (4 and 1), every ``lanes`` value with the last datapath, and every
  INT8 baseline at ``pe_stages`` 1; an ``act_hop`` other than the first value only with the
  last datapath (the others scale from their own datapath at the first ``act_hop``).
- Everywhere else the *array model*: ``A(v, n) = k_m · Σ_PEs P(v) + F_m · f(v, n) / f(m)`` where
  ``P(v)`` is the flattened PE area of variant ``v`` (rows that register ``w_out`` and rows that
  do not, by ``weight_hop``; columns that register ``a_out`` and columns that do not, by
  ``act_hop``), ``m`` the measured array closest to ``v`` (same variant at the largest measured
  size not above ``n``; else the same datapath, lanes and hops; else the same datapath and
  lanes; else the same lanes and hops; else the same lanes),
  ``k_m`` its PE part over the sum of its flattened PEs (hierarchy and cross-PE trimming), ``F_m``
  its non-PE area (skew, drain, front end) and ``f`` the register bits of an array's own logic
  outside the PEs (:func:`flows.estimate.front_registers`: skew chains grow as ``n²``, the front
  end as ``n``). The report states how well this predicts each measured 8 × 8 from its 4 × 4.
- The whole core: DSTAR's MPU plus its QPU (the QPU of the bench's preset with the bench's
  ``open_groups`` and ``pack_windows``, by part: from ``reports/asic_area.json`` when that
  report holds that configuration on the same library, else synthesized here; scaled per part by
  the estimate model's transistor count of that part at ``T = n`` and the variant's
  ``lanes``: :func:`flows.estimate.parts`); the INT8 core is its array alone. Buffers, VPU and
  control are the same in both cores and left out (they only add the same area to both).

  The QPU keeps the preset's ``sort_n`` = 32 at every size (the chunk the bench's lane
  utilization was measured with); its sorter then dominates the core of a small array.

Throughput: :mod:`bench.sweep.throughput` (the golden schedule's groups per tile at each size and
lanes, each tile at least a tile period, calibrated on the measured bench's cycles; the steady
state beside it). Reports: :mod:`app.sweeps.report` (Pareto front, crossover, table, plot).
"""

from __future__ import annotations

import itertools
import time

from dstar_rtl.golden.config import Config, preset

__all__ = ["BASE_PRESET", "LEVERS", "variants", "baseline_variants", "config_for",
           "plan_jobs", "synth_job", "run_sweep"]

BASE_PRESET = "fpga"
#: Lever → values accepted on the command line (``weight_hop`` also takes integers).
LEVERS = {"digit_product": ("multiply", "select"), "digits": ("slice", "booth"),
          "acc": ("derived", "26")}
#: The hop levers of a variant, as they enter the array's configuration.
HOPS = ("weight_hop", "act_hop")
REF_LANES, REF_STAGES = 4, 1


def hop_value(h, n: int) -> int:
    """``weight_hop`` (``act_hop``) for an ``n × n`` array: ``"rows"`` (``"cols"``) → n, an
    integer capped at n."""
    return n if h in ("rows", "cols") else min(int(h), n)


def config_for(v: dict, n: int, baseline: bool = False) -> Config:
    """The configuration of variant ``v`` at ``rows = cols = n``."""
    ov = dict(rows=n, cols=n, pe_stages=v["pe_stages"])
    ov["weight_hop"] = hop_value(v.get("weight_hop", 1), n)
    ov["act_hop"] = hop_value(v.get("act_hop", 1), n)
    if not baseline:
        ov.update(lanes=v["lanes"], digit_product=v["digit_product"], digits=v["digits"])
        if v["acc"] != "derived":
            ov.update(acc_width=int(v["acc"]), overflow_detect=True)
    return preset(BASE_PRESET, **ov)


def _hop_key(v: dict) -> str:
    """``hop<k>`` for a ``weight_hop`` other than 1, ``ahop<k>`` for an ``act_hop`` other than 1
    (``hoprows ahopcols``: both operands broadcast)."""
    return ((f" hop{v['weight_hop']}" if str(v.get("weight_hop", 1)) != "1" else "")
            + (f" ahop{v['act_hop']}" if str(v.get("act_hop", 1)) != "1" else ""))


def _key(v: dict) -> str:
    if v["kind"] == "int8":
        return f"int8 s{v['pe_stages']}" + (" -booth" if v["booth"] else "") + _hop_key(v)
    return (f"L{v['lanes']} s{v['pe_stages']} {v['digit_product']}/{v['digits']}"
            + (f" acc{v['acc']}" if v["acc"] != "derived" else "") + _hop_key(v))


def variants(lanes, stages, digit_product, digits, acc, hops, act_hops=("1",)) -> list:
    """Every DSTAR variant (``acc`` 26 only where the derived accumulator is wider), every
    ``weight_hop`` with every ``act_hop``."""
    out = []
    for L, S, dp, dg, a, h, ah in itertools.product(lanes, stages, digit_product, digits, acc,
                                                    hops, act_hops):
        v = dict(kind="dstar", lanes=L, pe_stages=S, digit_product=dp, digits=dg, acc=a,
                 weight_hop=h, act_hop=ah)
        if a != "derived":
            ref = config_for(dict(v, acc="derived"), 8)
            if int(a) >= ref.safe_acc_width:
                continue
        v["key"] = _key(v)
        out.append(v)
    return out


def baseline_variants(stages, hops, act_hops=("1",)) -> list:
    out = []
    for S, h, ah, b in itertools.product(stages, hops, act_hops, (False, True)):
        v = dict(kind="int8", pe_stages=S, weight_hop=h, act_hop=ah, booth=b)
        v["key"] = _key(v)
        out.append(v)
    return out


def _pe_overrides(v: dict, register_w: bool, register_a: bool = True) -> dict:
    """Overrides of the PE synthesized alone (``fpga`` preset, 8 rows): ``weight_hop`` 1
    registers ``w_out``, 2 builds the wire PE; ``act_hop`` likewise for ``a_out``
    (gen.units)."""
    cfg = config_for(dict(v, weight_hop=1, act_hop=1), 8, v["kind"] == "int8")
    ov = {k: getattr(cfg, k) for k in ("lanes", "pe_stages", "digit_product", "digits",
                                       "acc_width", "overflow_detect")}
    ov["weight_hop"] = 1 if register_w else 2
    if not register_a:
        ov["act_hop"] = 2
    return ov


def pe_kinds(dvars: list, bvars: list) -> list:
    """The ``(register_w, register_a)`` PEs the arrays of these variants are built from: the
    wire kinds only where a hop other than 1 is swept."""
    vs = dvars + bvars
    w = (True, False) if any(str(v.get("weight_hop", 1)) != "1" for v in vs) \
        else (True,)
    a = (True, False) if any(str(v.get("act_hop", 1)) != "1" for v in vs) \
        else (True,)
    return list(itertools.product(w, a))


def _array_overrides(cfg: Config) -> dict:
    return {k: getattr(cfg, k) for k in ("rows", "cols", "lanes", "pe_stages", "digit_product",
                                         "digits", "acc_width", "overflow_detect")
            + HOPS}


def plan_jobs(dvars: list, bvars: list, measure_sizes) -> list:
    """Every synthesis job: ``(label, unit, overrides, booth, parts)``, without duplicates."""
    jobs, seen = [], set()

    def add(label, unit, ov, booth, parts):
        sig = (unit, tuple(sorted(ov.items())), booth, parts)
        if sig not in seen:
            seen.add(sig)
            jobs.append((label, unit, ov, booth, parts))

    kinds = pe_kinds(dvars, bvars)
    for v in dvars + bvars:
        unit = "baseline_pe" if v["kind"] == "int8" else "pe"
        for rw, ra in kinds:
            wires = [n for n, r in (("w_out", rw), ("a_out", ra)) if not r]
            add(f"{unit} {v['key']}" + (f" ({' '.join(wires)} wire)" if wires else ""), unit,
                _pe_overrides(v, rw, ra), v.get("booth", False), False)
    for v in _measured_variants(dvars, bvars):
        for n in measure_sizes:
            cfg = config_for(v, n, v["kind"] == "int8")
            ov = _array_overrides(cfg)
            unit = "baseline" if v["kind"] == "int8" else "mpu"
            add(f"{unit} {n}x{n} {v['key']}", unit, ov, v.get("booth", False), True)
    return jobs


def _measured_variants(dvars, bvars) -> list:
    """The subset synthesized as whole arrays (module docstring): an ``act_hop`` other than the
    first only with the last datapath."""
    base = [v for v in bvars if v["pe_stages"] == _ref(bvars, "pe_stages", REF_STAGES)]
    if not dvars:
        return base
    L0 = _ref(dvars, "lanes", REF_LANES)
    S0 = _ref(dvars, "pe_stages", REF_STAGES)
    A0 = dvars[0].get("act_hop", "1")
    ref_all = [v for v in dvars if v["lanes"] == L0 and v["pe_stages"] == S0]
    at_ref = [v for v in ref_all if v.get("act_hop", "1") == A0]
    last = at_ref[-1]
    same = ("digit_product", "digits", "acc", "weight_hop")
    acts = [v for v in ref_all if v.get("act_hop", "1") != A0
            and all(v[k] == last[k] for k in same)]
    lanes = [v for v in dvars if v["pe_stages"] == S0 and v["lanes"] != L0
             and v.get("act_hop", "1") == A0 and all(v[k] == last[k] for k in same)]
    return at_ref + acts + lanes + base


def _ref(vs, k, want):
    vals = [v[k] for v in vs]
    return want if want in vals else vals[0]


def synth_job(unit: str, overrides: dict, booth: bool, parts: bool, liberty: str,
              reuse: bool) -> dict:
    """One synthesis run (a farm job: a fresh Yosys process): area figures and, by part, the
    PEs' and the rest's."""
    from dstar_rtl.bench.asic import parts_of
    from dstar_rtl.flows.synth import synthesize

    cfg = preset(BASE_PRESET, **overrides)
    r = synthesize(unit, cfg, "asic", liberty=liberty, booth=booth, parts=parts, reuse=reuse)
    x = r["resources"]
    out = dict(unit=unit, overrides=overrides, booth=booth, config_hash=cfg.hash(),
               area=x["area"], combinational=x["combinational_area"],
               sequential=x["sequential_area"], ff=x["ff"], delay_ns=r["timing"]["delay"],
               seconds=r["seconds"], reused=bool(r.get("reused")))
    if parts:
        by = parts_of(r)
        out["parts"] = {k: v["area"] for k, v in by.items()}
        out["pe_area"] = sum(v["area"] for k, v in by.items() if k == "PEs")
        out["rest_area"] = round(out["area"] - out["pe_area"], 3)
    return out


#: The configuration fields that decide how the QPU packs its groups (the bench's are the sweep's).
PACKING_FIELDS = ("packer", "pack_bins", "open_groups", "pack_windows")


def bench_packing(bench_config: dict) -> dict:
    """The packing fields of a bench report's configuration (a field it does not name, from a
    report older than the field, is the field's default: what that bench ran)."""
    fields = Config.fields()
    return {k: bench_config.get(k, fields[k].default) for k in PACKING_FIELDS}


def qpu_synth_job(liberty: str, reuse: bool, packer: dict | None = None,
                  name: str = "tiny") -> dict:
    """The QPU of preset ``name`` by part (RAMs as macros), as ``app.reports.asic`` runs it,
    with the packer settings ``packer`` (``open_groups``, ``pack_windows``: the bench's)."""
    from dstar_rtl.bench.asic import parts_of
    from dstar_rtl.flows.synth import synthesize

    cfg = preset(name, **(packer or {}))
    r = synthesize("qpu", cfg, "asic", liberty=liberty, parts=True, reuse=reuse)
    how = ", ".join(f"{k}={v}" for k, v in (packer or {}).items())
    return dict(area=r["resources"]["area"], config_hash=cfg.hash(), preset=name,
                parts={k: v["area"] for k, v in parts_of(r).items()},
                source="synthesized" + (f" with {how}" if how else ""))


def run_sweep(dvars, bvars, sizes, measure_sizes, liberty: str, *, reuse: bool, jobs: int,
              scheduler, qpu: dict | None, progress, packer: dict | None = None,
              qpu_preset: str = "tiny") -> dict:
    """Synthesize every job on the farm; returns ``{"runs": {label: result}, "qpu": ...,
    "seconds": ...}``. Without a stored ``qpu`` the QPU of ``qpu_preset`` is synthesized here
    with the packer settings ``packer``."""
    from dstar_rtl.flows.farm import run_jobs

    plan = plan_jobs(dvars, bvars, measure_sizes)
    args = [(unit, ov, booth, parts, liberty, reuse) for _, unit, ov, booth, parts in plan]
    labels = [p[0] for p in plan]
    if qpu is None:
        args.append(("qpu", dict(packer or {}, preset=qpu_preset), False, True, liberty,
                     reuse))
        labels.append(f"qpu {qpu_preset} by part")
    progress(f"{len(args)} synthesis runs ({len(dvars)} DSTAR and {len(bvars)} INT8 variants; "
             f"arrays measured at {', '.join(f'{n}x{n}' for n in measure_sizes)}), "
             f"{jobs} job(s)" + (f" on {scheduler}" if scheduler else ""))
    t0 = time.perf_counter()
    res = run_jobs(_dispatch, args, jobs=jobs, scheduler=scheduler, labels=labels,
                   progress=progress)
    if qpu is None:
        qpu = res.pop()
        labels.pop()
    return dict(runs=dict(zip(labels, res)), plan=plan, qpu=qpu,
                seconds=round(time.perf_counter() - t0, 1))


def _dispatch(unit, ov, booth, parts, liberty, reuse):
    if unit == "qpu":
        ov = dict(ov)
        return qpu_synth_job(liberty, reuse, ov, ov.pop("preset", "tiny"))
    return synth_job(unit, ov, booth, parts, liberty, reuse)

