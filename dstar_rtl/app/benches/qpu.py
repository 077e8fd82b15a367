"""QPU rate on golden workloads from the reference DiT (``dstar measure qpu-rate``).

For each preset it streams the closed-loop differences of every linear layer of the reference DiT
(steps 1.. of a DDIM run: the steady state; step 0 is the dense first step, reported apart)
through the generated QPU under Verilator, with no input gaps and an always-ready output, and
measures: sub-channels accepted per cycle, groups emitted per cycle, and the cycles an MPU
consuming one group per cycle would wait for the QPU (bubbles in the group stream between its
first and last group). ``--open-groups K ...`` measures each preset with each number of open
partial groups in the packer (``cfg.open_groups``) on the same tiles, side by side, and each
``K > 0`` with each ``--pack-windows`` setting (``cfg.pack_windows``), and the exponent bins
(``cfg.packer = "bins"``) with each ``--pack-bins`` count. The result is :class:`QpuRate`
(``reports/qpu_rate.json``, a row per preset, packing and phase), its table
``reports/qpu_rate.md``; :data:`MEASUREMENT` runs it (:mod:`app.measurement`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dstar_rtl.app.experiments import run_provenance
from dstar_rtl.app.measurement import Measurement, check_among, option
from dstar_rtl.bench.qpu import measure
from dstar_rtl.gen.errors import UserError
from dstar_rtl.gen.progress import say
from dstar_rtl.gen.tables import md_table
from dstar_rtl.golden.config import MAX_OPEN_GROUPS, PACK_BINS, PRESETS, preset
from dstar_rtl.models.difference_tiles import dit_difference_tiles
from dstar_rtl.results.qpu_rate import QpuRate, QpuRateRow

__all__ = ["QpuRateOptions", "QpuRateRow", "QpuRate",
           "measure_rates", "markdown", "MEASUREMENT"]


@dataclass(frozen=True)
class QpuRateOptions:
    """What ``dstar measure qpu-rate`` measures (checked at construction)."""

    presets: tuple[str, ...] = option(("tiny", "fpga"), "presets to measure",
                                      choices=sorted(PRESETS))
    steps: int = option(4, "DDIM steps of the reference DiT run (at least 2)")
    open_groups: tuple[int, ...] = option((0, 4), "open partial groups of the packer to "
                                          "measure", metavar="K")
    pack_windows: tuple[int, ...] = option((1, 2), "packer windows per cycle to measure with "
                                           "open groups", metavar="W")
    pack_bins: tuple[int, ...] = option((4, 8), "exponent-bin counts of packer = bins to "
                                        "measure (none: the sorting packer only)", metavar="N",
                                        nargs="*")

    def __post_init__(self):
        check_among("--presets", self.presets, PRESETS)
        bad = [k for k in self.open_groups if not 0 <= k <= MAX_OPEN_GROUPS]
        if bad:
            raise UserError(f"--open-groups must lie in 0..{MAX_OPEN_GROUPS}, not {bad[0]}")
        bad = [w for w in self.pack_windows if w not in (1, 2)]
        if bad:
            raise UserError(f"--pack-windows must be 1 or 2, not {bad[0]}")
        bad = [n for n in self.pack_bins if n not in PACK_BINS]
        if bad:
            raise UserError(f"--pack-bins must be one of {PACK_BINS}, not {bad[0]}")
        if self.steps < 2:
            raise UserError(f"--steps must be at least 2 (step 0 and a steady-state step), "
                            f"not {self.steps}")


def measure_rates(opts: QpuRateOptions, previous=None) -> QpuRate:
    """Every preset of ``opts`` with every packing, on the first step's and the steady state's
    tiles (progress on stderr; ``previous``, the stored result, is not needed)."""
    variants = [(f"sort, open {k}, windows {w}",
                 dict(packer="sort", open_groups=k, pack_windows=w))
                for k in opts.open_groups for w in (opts.pack_windows if k else [1])]
    variants += [(f"bins {n}", dict(packer="bins", open_groups=0, pack_windows=1, pack_bins=n))
                 for n in opts.pack_bins]
    rows, configs = [], {}
    for name in opts.presets:
        tiles = dit_difference_tiles(preset(name), steps=opts.steps)
        for label, over in variants:
            cfg = preset(name, **over)
            configs[f"{name}/{label}"] = cfg.hash()
            for phase, sel in (("first step", lambda t: t == 0),
                               ("steady state", lambda t: t > 0)):
                chosen = [dx for _, step, _, dx in tiles if sel(step)]
                t0 = time.time()
                say(f"[qpu rate] {name} {label} {phase}: {len(chosen)} tiles ...")
                r = measure(cfg, chosen)
                rows.append(QpuRateRow(preset=name, packing=label, **over, phase=phase,
                                       config_hash=cfg.hash(), tiles=len(chosen), **r))
                say(f"[qpu rate]   {r['groups_per_cycle']:.3f} groups/cycle, "
                    f"{r['mpu_wait_cycles']} MPU wait cycles ({time.time() - t0:.0f} s)")
    return QpuRate(run_provenance("qpu-rate", configs), rows=tuple(rows))


#: The rate table: header, cell of a row.
RATE_TABLE = (
    ("preset", lambda r: r.preset), ("packing", lambda r: r.packing),
    ("phase", lambda r: r.phase), ("tiles", lambda r: str(r.tiles)),
    ("sub-channels", lambda r: str(r.subchannels)), ("groups", lambda r: str(r.groups)),
    ("sub-ch/cycle", lambda r: f"{r.subchannels_per_cycle:.3f}"),
    ("groups/cycle", lambda r: f"{r.groups_per_cycle:.3f}"),
    ("groups/sub-ch", lambda r: f"{r.groups_per_subchannel:.2f}"),
    ("MPU wait cycles", lambda r: str(r.mpu_wait_cycles)),
    ("lane fill", lambda r: f"{r.lane_fill:.1%}"))


def markdown(result: QpuRate) -> str:
    """``reports/qpu_rate.md`` from its result."""
    table = md_table([h for h, _ in RATE_TABLE],
                     [[f(r) for _, f in RATE_TABLE] for r in result.rows], left=len(RATE_TABLE))
    return ("# QPU rate on the reference DiT's differences\n\n"
            "Generated by `dstar measure qpu-rate` (Verilator, no input gaps, output always "
            "ready). *MPU wait cycles*: cycles between the first and the last group in which no "
            "group was available to an MPU that takes one per cycle. *Packing*: `sort` sorts "
            "chunks of `sort_n` and packs them, holding *open* partial lane groups across the "
            "chunks of a tile (`open_groups`) and packing *windows* per cycle (`pack_windows`: "
            "2 also emits the window after a stored one); `bins N` keeps one open group per "
            "exponent bin, N bins, no sort (`packer = \"bins\"`, `pack_bins`).\n\n"
            + table + "\n")


MEASUREMENT = Measurement(
    name="qpu-rate", stem="qpu_rate",
    summary="The QPU's groups per cycle and the MPU's waits on the reference DiT's closed-loop "
            "differences, on the generated QPU under Verilator.", options=QpuRateOptions,
    result=QpuRate, measure=measure_rates, render=markdown)
