"""Sampling runs behind ``dstar sample``: a DiT sampled with DDIM by one backend, beside the float
model from the same seeds, with per-step statistics and per-sample quality.

Backends (:data:`BACKENDS`):

- ``float``: :class:`models.dit.DiT` (float64), the reference;
- ``golden-int``: :class:`models.dit_int_model.IntDiT`, every layer the core runs in integers
  (the model the RTL core must equal bit for bit);
- ``verilator``, ``icarus``: the generated core of the configuration, in cocotb
  (:mod:`tb.test_sample`): the whole model compiled onto it (:mod:`program.model`), every
  step checked against the integer golden bit for bit; per step the core's cycles and counters.

Per step the record holds whether the step was a SAR cache step, the SAR kept fraction (of the
attention blocks), the saturations (golden), the QPU counters of every QUANT the core runs in
the step (``qpu_<name>`` of :data:`golden.layouts.COUNTER_NAMES`: sub-channels per precision,
slice columns, groups, padded lanes, shifts; attention's Q and P and the padded patch channels
included; for ``golden-int`` the golden's count, :func:`program.model.quant_counters`; for
an RTL backend the core's own counters) and ``average_bits``, the FMDQ precision over those
sub-channels; ``layer_average_bits`` is the golden's precision over the conditional row's
differential layers alone. Per sample ``k`` the seed is ``seed + k`` (start noise) and the label
``labels[k]``. With a guidance scale ``!= 1`` every backend runs a conditional and an
unconditional row (the null class), each integer row with its own differential state. The SAR
masks (unless ``sar`` is off) and, with ``cfg.base_offset`` set, the per-layer static bases are
profiled once on a float run (:func:`analysis.calibration.calibrate`, seed ``seed + 1000``).
"""

from __future__ import annotations

import time

import numpy as np

from dstar_rtl.analysis.calibration import CALIBRATION_SEED_OFFSET, calibrate
from dstar_rtl.gen.progress import progress, say
from dstar_rtl.golden.config import Config
from dstar_rtl.models.digits import IMAGE_SIZE, classify, psnr
from dstar_rtl.models.dit import DiT, DiTSpec
from dstar_rtl.models.dit_int_model import IntDiT, average_bits, ddim_sample_float, ddim_sample_int
from dstar_rtl.program.isa import beat_bytes, sram_bytes
from dstar_rtl.program.model import quant_counters
from dstar_rtl.sim.sample_job import DRAM_PAUSE

__all__ = ["BACKENDS", "RTL_BACKENDS", "run_samples", "is_digits_model",
           "check_model", "RTLMismatch"]

BACKENDS = ("float", "golden-int", "verilator", "icarus")
RTL_BACKENDS = ("verilator", "icarus")


def is_digits_model(spec: DiTSpec) -> bool:
    """Whether the digits classifier (:func:`models.digits.classify`) can label this model's
    samples: one channel of ``IMAGE_SIZE`` × ``IMAGE_SIZE``."""
    return spec.channels == 1 and spec.image_size == IMAGE_SIZE


class RTLMismatch(Exception):
    """The RTL core differed from the integer golden (the message names the first difference)."""


def check_model(spec: DiTSpec, params: dict, cfg: Config, backend: str = "golden-int",
                guidance: float = 1.0, stream=()):
    """Build the integer model once and, for an RTL backend, compile it onto the configuration's
    core (raises ValueError naming what does not fit ``cfg``)."""
    model = IntDiT(spec, params, cfg)
    if backend in RTL_BACKENDS:
        from dstar_rtl.program.isa import core_for
        from dstar_rtl.program.model import compile_model
        compile_model(model, core_for(cfg), rows=1 if guidance == 1.0 else 2, stream=stream)


def _rtl_samples(spec, params, cfg, cal, *, simulator, steps, labels, guidance, seed,
                 stream, waves, jobs, optimize, dram=None) -> dict:
    """Every sample on the RTL core: the labels split into ``jobs`` cocotb runs side by side
    (each with its own core and init), the core built once (Verilator at ``-O2`` when
    ``optimize``). Returns the images and the loops' records, merged in label order; progress
    lines on stderr as the steps finish."""
    import tempfile
    import time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from dstar_rtl.gen.paths import SIM_BUILD
    from dstar_rtl.sim.runner import build, run_cocotb
    from dstar_rtl.sim.sample_job import JOB_ENV, SampleJob, read_result, write_job

    jobs = max(1, min(jobs, len(labels)))
    shards = [list(range(len(labels)))[j::jobs] for j in range(jobs)]
    SIM_BUILD.mkdir(parents=True, exist_ok=True)
    build("core", cfg, simulator, bool(waves), optimize)    # (dstar sample built it already)
    with tempfile.TemporaryDirectory(prefix="sample-", dir=SIM_BUILD) as tmp:
        tmp = Path(tmp)
        specs = []
        for j, idx in enumerate(shards):
            job = SampleJob(spec=spec, params=params, masks=cal.masks, bases=cal.bases,
                            steps=steps,
                            labels=[labels[k] for k in idx], seeds=[seed + k for k in idx],
                            guidance=guidance, stream=tuple(stream),
                            result=tmp / f"result{j}.npz", dram=dram)
            write_job(tmp / f"job{j}.npz", job)
            specs.append(job)

        def run(j):
            run_cocotb("core", cfg, simulator, "dstar_rtl.tb.test_sample", seed=seed,
                       extra_env={JOB_ENV: str(tmp / f"job{j}.npz")}, waves=waves or None,
                       tag=f"sample{j}", optimize=optimize)

        total, seen = len(labels) * steps, -1
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run, j) for j in range(jobs)]
            while not all(f.done() for f in futures):
                time.sleep(2)
                done = sum(len(job.progress.read_text().splitlines())
                           for job in specs if job.progress.exists())
                if done != seen:
                    say(f"sample: {done}/{total} steps on the {simulator} core, bit-exact")
                    seen = done
        results = []
        for f, job in zip(futures, specs):
            try:
                f.result()
            except AssertionError as why:
                res = read_result(job.result) if job.result.exists() else {}
                raise RTLMismatch(res.get("error") or str(why).splitlines()[0]) from None
            results.append(read_result(job.result))
    images = [None] * len(labels)
    samples = [None] * len(labels)
    for idx, res in zip(shards, results):
        for pos, k in enumerate(idx):
            images[k] = res["images"][pos]
            samples[k] = dict(res["record"]["samples"][pos], index=k)
    first = results[0]["record"]
    record = dict(first, samples=samples, init_cycles=[r["record"]["init_cycles"] for r in results])
    return {"images": np.stack(images), "record": record}


def run_samples(spec: DiTSpec, params: dict, cfg: Config, *, backend: str, steps: int,
                labels: list, guidance: float, seed: int, sar: bool = True, stream=(),
                waves: bool = False, jobs: int = 1, optimize: bool = True,
                dram: tuple | None = None) -> dict:
    """Sample ``len(labels)`` images with ``backend`` and with the float model; returns
    ``{"images": (n, C, H, W) backend samples, "float": the float samples, "record": a
    JSON-serialisable dict}``. An RTL backend raises :class:`RTLMismatch` at the first
    difference from the integer golden; ``dram``: ``(latency, bytes_per_cycle)`` of a
    deterministic DRAM behind a core with a DRAM port (:class:`sim.dram_timing.DramTiming`;
    None: the AXI RAM paused at random)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    t0 = time.perf_counter()
    cal = calibrate(spec, params, cfg, steps, seed + CALIBRATION_SEED_OFFSET, sar=sar) \
        if backend != "float" else None
    masks = cal.masks if cal is not None else None
    # The fraction of (head, query block, key block) attention blocks the masks keep: what a
    # cache step computes (a reuse step replays the P-cache of the last one).
    kept = round(float(np.mean([m.mean() for m in masks.values()])), 4) if masks else 1.0
    fm = DiT(spec, params=params)
    rtl = None
    if backend in RTL_BACKENDS:
        rtl = _rtl_samples(spec, params, cfg, cal, simulator=backend, steps=steps,
                           labels=labels, guidance=guidance, seed=seed, stream=stream,
                           waves=waves, jobs=jobs, optimize=optimize, dram=dram)
    images, floats, samples = [], [], []
    for k, label in progress(enumerate(labels), "samples", total=len(labels)):
        s = seed + k
        xf = ddim_sample_float(fm, steps, s, label, guidance)
        per_step = []
        if backend == "float":
            x = xf
        elif rtl is not None:
            x = rtl["images"][k]
            per_step = [_rtl_step(st, kept) for st in rtl["record"]["samples"][k]["per_step"]]
        else:
            rows = [IntDiT(spec, params, cfg, masks, base_log2=cal.bases)
                    for _ in range(1 if guidance == 1.0 else 2)]

            def on_step(i, t, done):
                counters = quant_counters(rows[0], done)
                per_step.append(dict(
                    step=i, t=t, average_bits=round(average_bits([counters], "qpu_"), 4),
                    layer_average_bits=round(done[0].average_bits(), 4),
                    sar_kept_fraction=kept,
                    qpu_counters=counters,
                    cache_step=bool(done[0].blocks[0].cache_step) if done[0].blocks else None,
                    saturated=sum(d.saturated for d in done)))
            x, _ = ddim_sample_int(rows, steps, s, label, guidance, on_step=on_step)
        images.append(x)
        floats.append(xf)
        rec = dict(index=k, label=int(label), seed=s, per_step=per_step,
                   psnr_db=None if backend == "float" else _db(psnr(x, xf)))
        samples.append(rec)
        say(f"sample {k + 1}/{len(labels)} (label {label}) done"
            + ("" if rec["psnr_db"] is None else f", PSNR {rec['psnr_db']} dB against float"))
    images, floats = np.stack(images), np.stack(floats)
    record = dict(backend=backend, model=spec.to_dict(), config=cfg.to_dict(),
                  config_hash=cfg.hash(), steps=steps, guidance=guidance, seed=seed, sar=sar,
                  kept_fraction=None if masks is None else
                  {k: round(float(m.mean()), 4) for k, m in masks.items()},
                  base_log2=None if cal is None else cal.bases,
                  samples=samples, seconds=round(time.perf_counter() - t0, 1))
    if rtl is not None:
        r = rtl["record"]
        cyc = [st["cycles"] for rec in samples for st in rec["per_step"]]
        # Every step of every sample came back from the loop with its values compared (the
        # loop stops at the first difference, and a failed run raised above).
        exact = all(len(rec["per_step"]) == steps and
                    all(st["values_checked"] > 0 for st in rec["per_step"]) for rec in samples)
        record["core"] = dict(
            bit_exact=exact, batch_rows=r["rows"], init_cycles=r["init_cycles"],
            runs=len(r["init_cycles"]),
            commands_per_step=r["commands_per_step"], streamed=r["streamed"],
            memory_map=r["memory_map"].splitlines(),
            cycles_per_step=dict(mean=round(float(np.mean(cyc)), 1), min=min(cyc), max=max(cyc)),
            cycles_per_image=round(float(np.sum(cyc)) / len(samples), 1),
            sram_bytes=sram_bytes(cfg),
            dram_bytes_per_image=_dram_per_image(cfg, r.get("dram_traffic"), samples),
            dram=None if not cfg.dram_width else
            dict(pause=DRAM_PAUSE) if dram is None else
            dict(latency=dram[0], bytes_per_cycle=dram[1]))
    if is_digits_model(spec):
        got, ref = classify(images), classify(floats)
        for rec, g, r in zip(samples, got, ref):
            rec.update(classifier=int(g), classifier_float=int(r))
        record["classifier_agreement"] = dict(
            with_label=int(np.sum(got == np.array(labels))), samples=len(labels),
            **({} if backend == "float" else dict(with_float=int(np.sum(got == ref)))))
    return dict(images=images, float=floats, record=record)


def _rtl_step(st: dict, kept: float) -> dict:
    """One step of the RTL loop's record as ``dstar sample`` reports it: the core's cycles and
    counters (``core_counters``, every counter; ``qpu_counters``, the QPU's), the average bits
    from the core's QPU counters (every QUANT it ran, padded zero sub-channels counted as 0
    bits), and the golden's layer average bits and saturations."""
    c = st["counters"]
    return dict(step=st["step"], t=st["t"], values_checked=st["values_checked"],
                average_bits=st["average_bits"],
                layer_average_bits=st["layer_average_bits"], sar_kept_fraction=kept,
                cache_step=st["cache_step"], saturated=st["saturated"], cycles=st["cycles"],
                qpu_counters={k: v for k, v in c.items() if k.startswith("qpu_")},
                core_counters=c)


def _dram_per_image(cfg, traffic, samples) -> dict | None:
    """DRAM bytes per image by kind (read and write together), the mean over the samples:
    the program's fixed transfers of each cache and reuse step (``traffic``,
    :meth:`program.model.ModelProgram.dram_traffic`), the P cache's groups from the core's
    beat counters less those. None without a DRAM port."""
    if not cfg.dram_width or not traffic:
        return None
    bb, per = beat_bytes(cfg), {}
    for s in samples:
        for st in s["per_step"]:
            c = st["core_counters"]
            fixed = traffic["cache" if st["cache_step"] else "reuse"]
            moved = c["dram_read_beats"] + c["dram_write_beats"]
            for kind, (r, w) in fixed.items():
                if kind != "pcache":
                    per[kind] = per.get(kind, 0) + (r + w) * bb
                    moved -= r + w
            per["pcache"] = per.get("pcache", 0) + moved * bb
    return {k: round(v / len(samples)) for k, v in per.items()}


def _db(v):
    return None if v is None or not np.isfinite(v) else round(float(v), 2)
