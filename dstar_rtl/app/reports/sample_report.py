"""The readable side of ``dstar sample``'s record: ``sample.md`` beside ``sample.json`` and
``sample.png`` (the same figures; the JSON has every counter of every step)."""

from __future__ import annotations

import numpy as np

from dstar_rtl.gen.tables import md_table
from dstar_rtl.results.sample import Sample

__all__ = ["sample_markdown"]


def _kept(rec: Sample) -> float:
    """The SAR kept fraction of a record (1 when no step says)."""
    steps = rec.samples[0].per_step if rec.samples else ()
    return steps[0].get("sar_kept_fraction", 1.0) if steps else 1.0


def sample_markdown(rec: Sample, png_name: str = "sample.png") -> str:
    """Markdown of a ``dstar sample`` result: the run, one row per sample (label, classifier,
    PSNR against float, core cycles per image) and, on an RTL backend, one row per step (cache
    or reuse step, core cycles and average bits over the samples)."""
    m, cfg, core = rec.model, rec.config, rec.core
    lines = [f"# Samples: {rec.backend}, {rec.steps} DDIM steps, guidance "
             f"{rec.guidance:g}", ""]
    lines.append(f"Model: {m['image_size']}×{m['image_size']}×{m['channels']}, patch "
                 f"{m['patch']}, D = {m['hidden']}, depth {m['depth']}, {m['heads']} heads. "
                 f"Configuration `{cfg['name']}` ({rec.config_hash}); SAR "
                 + (f"on ({_kept(rec):.1%} of the attention blocks kept)" if rec.sar
                    else "off") + f"; {rec.seconds:,.0f} s wall.")
    if core:
        depths = {k: v for k, v in cfg.items() if k.endswith("_rows") and v is not None}
        streamed = {b: len(v) for b, v in core.streamed.items() if v}
        cps = core.cycles_per_step
        lines += ["", f"On the generated core: **bit-exact against the integer golden at every "
                      f"step** ({core.batch_rows} batch row(s), {core.runs} simulator "
                      f"run(s), {core.commands_per_step:,} commands per step). Buffers set: "
                      + (", ".join(f"`{k}={v}`" for k, v in depths.items()) or "the preset's")
                      + ". Streamed through "
                      + ("DRAM" if cfg.get("dram_width") else "the host port") + ": "
                      + (", ".join(f"{n} layers' {b}" for b, n in streamed.items()) or "nothing")
                      + ".",
                  "", f"Core cycles per step: mean {cps['mean']:,.0f}, "
                      f"min {cps['min']:,.0f}, max {cps['max']:,.0f}; per image "
                      f"{core.cycles_per_image:,.0f} (every step of one sample, every batch "
                      f"row; the init program, {max(core.init_cycles):,} cycles, once per "
                      f"simulator run)."]
        if core.sram_bytes:
            lines += ["", "On-chip buffers: " + f"{sum(core.sram_bytes.values()) / 1024:,.1f} "
                      "KiB (" + ", ".join(f"{b} {v / 1024:,.1f}" for b, v in
                                          core.sram_bytes.items() if v) + ")."]
        if core.dram_bytes_per_image:
            d = core.dram_bytes_per_image
            lines += ["", f"DRAM per image: {sum(d.values()) / 2**20:,.2f} MiB read and "
                      "written (" + ", ".join(f"{k} {v / 2**20:,.2f}" for k, v in d.items())
                      + "; the P cache's from the core's beat counters)."]
    agree = rec.classifier_agreement
    if agree:
        lines += ["", f"Digits classifier: reads the label on {agree.with_label} of "
                      f"{agree.samples}"
                  + (f", agrees with the float samples on {agree.with_float} of "
                     f"{agree.samples}" if agree.with_float is not None else "") + "."]
    lines += ["", f"![samples]({png_name})", "", "## Per sample", ""]
    head = ["sample", "label", "seed", "PSNR vs float (dB)"]
    if agree:
        head += ["classifier", "classifier (float)"]
    if core:
        head += ["core cycles"]
    rows = []
    for s in rec.samples:
        r = [s.index, s.label, s.seed, s.psnr_db]
        if agree:
            r += [s.classifier, s.classifier_float]
        if core:
            r += [sum(st["cycles"] for st in s.per_step)]
        rows.append(r)
    lines.append(md_table(head, rows, digits=2))
    if core:
        lines += ["", "## Per step (mean over the samples)", ""]
        steps = list(zip(*(s.per_step for s in rec.samples)))
        lines.append(md_table(
            ["step", "t", "kind", "core cycles", "average bits (layers, golden)",
             "average bits (every QUANT, core)"],
            [[st[0]["step"], st[0]["t"], "cache" if st[0]["cache_step"] else "reuse",
              float(np.mean([x["cycles"] for x in st])),
              f"{np.mean([x['layer_average_bits'] for x in st]):.3f}",
              f"{np.mean([x['average_bits'] for x in st]):.3f}"] for st in steps]))
        lines += ["", "*average bits (layers, golden)*: the FMDQ precision over the sub-channels "
                      "of the differential layers (the integer golden's count); *every QUANT, "
                      "core*: from the core's QPU counters (checked at every step against the "
                      "golden's count), attention's Q and P included and padded zero "
                      "sub-channels counted as 0 bits."]
    return "\n".join(lines) + "\n"
