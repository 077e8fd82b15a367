"""Area of a whole core by part on a standard-cell library, for the DSTAR/INT8 comparison
(:mod:`app.reports.compare`): one hierarchical ``asic`` synthesis of the core
(:func:`flows.synth.synthesize`, ``parts=True``, RAMs left out as macros), its modules grouped
into the parts of :data:`PARTS`, its RAMs listed by bits with an SRAM estimate, and the
part-area model that carries the areas to the ``paper`` core.

SRAM estimate: :data:`SRAM_UM2_PER_BIT` (source in :data:`SRAM_SOURCE`) per bit and per read
port: a memory with ``r`` read ports counts ``r`` copies of its array (the usual way to add read
ports to a single-port SRAM; a write port shares a copy's port). The small queues of the
engines (a few entries) are RAMs to Yosys and are counted the same way.

Part-area model: each part's area is fitted as ``a + b·T + c·T²`` in the tile size ``T`` on
cores of :data:`FIT_SIZES` and checked, summed over the parts, on :data:`CHECK_SIZE`, a size it
was not fitted on; every core of the family is the ``paper`` preset with ``rows = cols =
vpu_lanes = T`` (sort_n 64, max_reduction 4608, the paper core's buffer depths).

Both cores are synthesized with :data:`ASIC_OPTIONS`: Yosys's Booth multiplier mapping
(``synth -booth``), the INT8 array's best in the component bench, applied to both cores (the
VPU's and the requantizers' multipliers are the same in each).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from dstar_rtl.golden.config import Config, preset

from .gate import GATE_OPTIONS

__all__ = ["PARTS", "part_of", "core_area", "sram_um2", "family_config", "fit_parts",
           "SRAM_UM2_PER_BIT", "SRAM_SOURCE", "FIT_SIZES", "CHECK_SIZE", "MPU_PARTS",
           "QPU_PARTS", "ASIC_OPTIONS"]

#: The ``asic`` synthesis options of every whole-core run (module docstring).
ASIC_OPTIONS = GATE_OPTIONS

#: Parts of the core by module path under the top (first match wins, so longer prefixes first).
PARTS = (
    ("array PEs", r"matrix\.mpu\.array\.pe_"),
    ("array skew and drain", r"matrix\.mpu\.array$"),
    ("array front end", r"matrix\.mpu$"),
    ("M requantizer", r"matrix\.requant(\.|$)"),
    ("M engine", r"matrix(\.|$)"),
    ("QPU sorter", r"quant\.qpu\.sorter"),
    ("QPU packer", r"quant\.qpu\.packer"),
    ("QPU front (max, bins, slices, chunks)", r"quant\.qpu"),
    ("Q engine", r"quant(\.|$)"),
    ("VPU", r"vpu(\.|$)"),
    ("V engine", r"vector(\.|$)"),
    ("H engine", r"host(\.|$)"),
    ("dispatcher", r"dispatch(\.|$)"),
    ("ABUF logic", r"abuf(\.|$)"),
)
TOP_PART = "top (buffer ports, counters, SREG)"
#: The array (MPU or INT8 array) and the QPU, for the QPU's share.
MPU_PARTS = ("array PEs", "array skew and drain", "array front end")
QPU_PARTS = ("QPU sorter", "QPU packer", "QPU front (max, bins, slices, chunks)")

SRAM_UM2_PER_BIT = 1.0 / 0.826     # µm² per bit: 0.826 Mb/mm²
SRAM_SOURCE = ("OpenRAM (Guthaus et al., ICCAD 2016), single-port SRAMs compiled for "
               "FreePDK45: 0.826 Mb/mm² (1.21 µm² per bit, periphery included), as the OpenRAM "
               "documentation's comparison with fabricated SRAMs lists it")
FIT_SIZES = (2, 4, 16)
CHECK_SIZE = 8


def part_of(module: str, top: str) -> str:
    """The part of :data:`PARTS` a module (``top.a.b``) belongs to."""
    path = module[len(top) + 1:] if module.startswith(top + ".") else ""
    for name, pattern in PARTS:
        if path and re.match(pattern, path):
            return name
    return TOP_PART


def _memories(res: dict) -> list:
    """The RAMs of a synthesis result with their ports (older results: parsed again from the
    work directory's ``memories.il``)."""
    mems = res["memories"]["list"]
    if mems and "read_ports" not in mems[0]:
        from .synth import _memories as parse
        mems = parse((Path(res["workdir"]) / "memories.il").read_text())
    return [m for m in mems if not m["rom"]]


def sram_um2(mem: dict) -> float:
    """The SRAM estimate of one RAM (module docstring)."""
    return mem["bits"] * max(1, mem["read_ports"]) * SRAM_UM2_PER_BIT


def core_area(res: dict) -> dict:
    """``{cells_um2, parts: {part: µm²}, ff, memories: [...], sram_um2, qpu_share}`` of an
    ``asic`` ``parts`` synthesis of the core."""
    parts: dict = {}
    for mod, m in res["modules"].items():
        p = part_of(mod, res["top"])
        parts[p] = round(parts.get(p, 0.0) + m["area"], 1)
    mems = [dict(module=m["module"], name=m["name"], width=m["width"], size=m["size"],
                 bits=m["bits"], read_ports=m["read_ports"], sram_um2=round(sram_um2(m), 1))
            for m in _memories(res)]
    qpu = sum(parts.get(p, 0.0) for p in QPU_PARTS)
    mpu = sum(parts.get(p, 0.0) for p in MPU_PARTS)
    return dict(cells_um2=round(res["resources"]["area"], 1), parts=parts,
                ff=res["resources"]["ff"], memories=mems,
                ram_bits=sum(m["bits"] for m in mems),
                sram_um2=round(sum(m["sram_um2"] for m in mems), 1),
                qpu_share=round(qpu / (qpu + mpu), 4) if qpu else 0.0,
                seconds=res.get("seconds"), config_hash=res["config_hash"])


def family_config(T: int, datapath: str) -> Config:
    """The core of size ``T`` of the part-area model's family (module docstring): the ``paper``
    preset at ``rows = cols = vpu_lanes = T`` (its operand hops capped at ``T``: broadcast
    below 8)."""
    return preset("paper", rows=T, cols=T, vpu_lanes=T, datapath=datapath)


def fit_parts(areas: dict, target: int = 64) -> dict:
    """Fit ``a + b·T + c·T²`` per part on :data:`FIT_SIZES` (``areas``: ``{T: {part: µm²}}``,
    every size of FIT_SIZES and CHECK_SIZE), check the sum on :data:`CHECK_SIZE` and predict
    ``target``. Returns ``{coefficients, check: {T, synthesized, model, error}, predicted:
    {parts, total}}``."""
    parts = sorted({p for a in areas.values() for p in a})
    X = np.array([[1.0, T, T * T] for T in FIT_SIZES])
    coef, pred, check = {}, {}, 0.0
    for p in parts:
        y = np.array([areas[T].get(p, 0.0) for T in FIT_SIZES])
        c = np.linalg.solve(X, y)
        coef[p] = [round(float(v), 4) for v in c]
        pred[p] = round(max(0.0, float(c @ [1.0, target, target * target])), 1)
        check += float(c @ [1.0, CHECK_SIZE, CHECK_SIZE ** 2])
    real = sum(areas[CHECK_SIZE].values())
    return dict(fit_sizes=list(FIT_SIZES), coefficients=coef,
                check=dict(T=CHECK_SIZE, synthesized=round(real, 1), model=round(check, 1),
                           error=round(check / real - 1, 4)),
                predicted=dict(T=target, parts=pred, total=round(sum(pred.values()), 1)))
