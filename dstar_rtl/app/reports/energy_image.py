"""The paper chip's energy per image from the measured ``fpga`` figures of ``dstar power``
(:mod:`bench.image_energy` measures them), the projection's rows and the comparison's part areas
(:mod:`perf.chip_energy`)."""

from __future__ import annotations

import json
from pathlib import Path

from dstar_rtl.bench.image_energy import floors
from dstar_rtl.gen.errors import UserError

__all__ = ["paper_chip_entries"]


def paper_chip_entries(rep: dict, projection, compare) -> dict:
    """The ``paper_chip`` and ``energy_per_image_j`` entries of ``reports/energy.json`` from
    its measured ``fpga`` figures (``rep``: ``arrays``, ``units``, ``image``, ``preset``;
    :func:`perf.chip_energy.fpga_side`), the projection's rows and the comparison's
    part areas: what ``dstar power --paper-chip`` recomputes without simulating anything."""
    from dstar_rtl.golden.config import preset
    from dstar_rtl.perf.chip_energy import fpga_side, project_energy
    from dstar_rtl.results.base import plain
    from dstar_rtl.results.compare import Compare

    proj, cmp = json.loads(Path(projection).read_text()), Compare.load(compare)
    if cmp.paper is None:
        raise UserError(f"{compare}: the comparison measured no paper core (dstar measure "
                        f"compare --presets paper)")
    side = fpga_side(rep)
    paper = project_energy(proj["rows"], plain(cmp.paper.area_model), side["sides"],
                           preset(rep["preset"]), side["voltage"])
    for r in paper:
        r["floors"] = floors(r["dstar"]["parts"], r["int8"]["parts"], r["int8"]["total_pj"])
    cores = rep["image"]["cores"]
    e_img = {"fpga": {s: c["total_pj"] * 1e-12 for s, c in cores.items()}}
    for r in paper:
        e_img[f"{r['model']} ({r['workload']})"] = {
            "dstar": r["dstar"]["energy_j"], "int8": r["int8"]["energy_j"],
            "a100": r["a100"]["energy_j"]}
    return dict(paper_chip=dict(models=paper, projection=str(projection), compare=str(compare)),
                energy_per_image_j=e_img)
