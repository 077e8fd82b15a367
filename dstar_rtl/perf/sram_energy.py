"""Energy of one SRAM access and of off-chip HBM traffic from published 45 nm figures.

The gate-level energy (:mod:`flows.power`) leaves the RAMs out: Yosys keeps them as macros and
the library has no SRAM cells. Their energy is charged per access instead:

- **SRAM**: Horowitz's 45 nm table (ISSCC 2014, "Computing's energy problem", 0.9 V: a 64-bit
  read of an 8 KB SRAM 10 pJ, of 32 KB 20 pJ, of 1 MB 100 pJ) as energy per bit read, and below
  8 KB the slope of CACTI's 32-bit-port sweep at 45 nm (``hsharma35/bitfusion``,
  ``bitfusion/sram/cacti_sweep.csv``: 1 KB 1.13 pJ, 8 KB 6.39 pJ a read), interpolated
  log-log in the memory's capacity (clamped to the end slopes outside 1 KB .. 1 MB). A write
  costs CACTI's write/read ratio at 16 KB (8.42 / 9.98). An access of a ``w``-bit row costs
  ``w`` times the per-bit figure of the memory's own capacity (no banking assumed: a 1 MB
  buffer pays the 1 MB figure), scaled by ``(V / 0.9 V)²`` to the gate-level library's voltage.
  Extra read ports add area (``flows.core_parts``), not energy per access, here.
- **HBM2**: 3.97 pJ per bit moved (O'Connor et al., MICRO 2017: row activation 1.21, on-die
  data movement 2.24, I/O 0.30), at its own voltage (not scaled).

These figures and their sources are ``../shared/REFERENCES.md``'s. Units: pJ.
:func:`memory_accesses` and :func:`sram_energy` apply them to a core's RAMs (as the ASIC
synthesis lists them) with an image's counters and executor reads.
"""

from __future__ import annotations

import math

from dstar_rtl.models.published import CACTI_45NM, HBM2, HOROWITZ_45NM

__all__ = ["sram_read_pj", "sram_write_pj", "access_pj", "memory_accesses", "sram_energy",
           "HBM_PJ_PER_BIT", "SOURCES", "REFERENCE_V"]

#: ``(capacity in bytes, pJ per bit read at 0.9 V)``, ascending: CACTI's 1 KB point set on
#: Horowitz's 8 KB figure by CACTI's own 1 KB / 8 KB ratio, then Horowitz's three points.
_H, _C = HOROWITZ_45NM["sram_read_64b_pj"], CACTI_45NM["read_32b_pj"]
_POINTS = ((1024, _H[8 * 1024] / 64 * _C[1024] / _C[8 * 1024]),
           *((kb, pj / 64) for kb, pj in sorted(_H.items())))
REFERENCE_V = HOROWITZ_45NM["volts"]
_WRITE_OVER_READ = CACTI_45NM["write_16k_pj"] / CACTI_45NM["read_16k_pj"]
HBM_PJ_PER_BIT = HBM2["pj_per_bit"]
SOURCES = {
    "sram": (f"{HOROWITZ_45NM['source']}: 64-bit reads of 8 KB, 32 KB and 1 MB SRAMs: "
             + ", ".join(f"{pj:g}" for _kb, pj in sorted(_H.items()))
             + f" pJ; below 8 KB the slope and the write/read ratio of {CACTI_45NM['source']}: "
             f"1 KB {_C[1024]} pJ, 8 KB {_C[8 * 1024]} pJ a 32-bit read; 16 KB read "
             f"{CACTI_45NM['read_16k_pj']}, write {CACTI_45NM['write_16k_pj']} pJ; log-log in "
             f"capacity, scaled by (V / {REFERENCE_V})²"),
    "hbm": HBM2["source"],
}


def _per_bit(capacity_bytes: float) -> float:
    """pJ per bit read at 0.9 V of an SRAM of ``capacity_bytes`` (module docstring)."""
    if capacity_bytes <= 0:
        raise ValueError(f"capacity must be positive, not {capacity_bytes}")
    x = math.log(capacity_bytes)
    pts = [(math.log(c), math.log(e)) for c, e in _POINTS]
    i = 0 if x < pts[1][0] else len(pts) - 2 if x >= pts[-2][0] else \
        max(k for k in range(len(pts) - 1) if pts[k][0] <= x)
    (x0, y0), (x1, y1) = pts[i], pts[i + 1]
    return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def sram_read_pj(width_bits: int, rows: int, voltage: float = REFERENCE_V) -> float:
    """pJ of one read of a ``width_bits``-wide row of a ``rows``-deep SRAM at ``voltage``."""
    if width_bits < 1 or rows < 1:
        raise ValueError(f"an SRAM needs width >= 1 and rows >= 1, not {width_bits}x{rows}")
    return width_bits * _per_bit(width_bits * rows / 8) * (voltage / REFERENCE_V) ** 2


def sram_write_pj(width_bits: int, rows: int, voltage: float = REFERENCE_V) -> float:
    """pJ of one write (module docstring: CACTI's write/read ratio)."""
    return sram_read_pj(width_bits, rows, voltage) * _WRITE_OVER_READ


def access_pj(width_bits: int, rows: int, reads: int, writes: int,
              voltage: float = REFERENCE_V) -> float:
    """pJ of ``reads`` reads and ``writes`` writes of one SRAM."""
    return (reads * sram_read_pj(width_bits, rows, voltage)
            + writes * sram_write_pj(width_bits, rows, voltage))


def memory_accesses(mem: dict, counts: dict) -> tuple | None:
    """``(reads, writes)`` of one RAM of the core (``{"module", "name"}`` as the ASIC synthesis
    lists it) from ``counts`` (the core's row counters and the executor's memory reads,
    :data:`program.executor.READS`; a count not given is 0), or None for a RAM not counted (the
    engines' FIFOs). An ABUF row access is one access of each of its banks."""
    name = mem["name"]
    if name.startswith("bank") and mem["module"].endswith(".abuf"):
        return counts.get("abuf_reads", 0), counts.get("abuf_writes", 0)
    table = {"xbuf": ("xbuf_reads", "xbuf_writes"), "ybuf": ("ybuf_reads", "ybuf_writes"),
             "weights": ("wmem_reads", "wmem_writes"), "gmem": ("gmem_reads", "gmem_writes"),
             "rbuf": ("rbuf_reads", None), "vbuf": ("vbuf_reads", None),
             "mask": ("mask_reads", None)}
    if name not in table:
        return None
    r, w = table[name]
    return counts.get(r, 0), (counts.get(w, 0) if w else 0)


def sram_energy(memories: list, counts: dict, voltage: float) -> dict:
    """pJ of the SRAM accesses ``counts`` makes (:func:`memory_accesses`) by RAM: ``{"rams":
    [...], "by_buffer": {buffer: pJ} (ABUF's banks together), "total_pj", "not_counted":
    [names]}``."""
    rams, skipped, total, by_buffer = [], [], 0.0, {}
    for m in memories:
        acc = memory_accesses(m, counts)
        if acc is None:
            skipped.append(f"{m['module'].rsplit('.', 1)[-1]}.{m['name']}")
            continue
        r, w = acc
        pj = access_pj(m["width"], m["size"], r, w, voltage)
        total += pj
        buf = "abuf" if m["module"].endswith(".abuf") else m["name"]
        by_buffer[buf] = by_buffer.get(buf, 0.0) + pj
        rams.append(dict(name=m["name"], width=m["width"], rows=m["size"], reads=r, writes=w,
                         read_pj=sram_read_pj(m["width"], m["size"], voltage),
                         write_pj=sram_write_pj(m["width"], m["size"], voltage), pj=pj))
    return dict(rams=rams, by_buffer=by_buffer, total_pj=total, not_counted=skipped)
