"""Resources against array size: the MPU and the INT8 baseline array at ``rows = cols`` of 2, 4,
6 and 8 (the ``tiny`` preset otherwise), ECP5 synthesis with DSP blocks, through the same flow
as ``dstar synth`` (one fresh Yosys process per configuration).

``python -m fpga.sweep [--sizes 2 4 6 8] [--reuse]`` writes ``reports/sweep.json``;
``dstar report`` tables and plots it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from golden.config import preset

from .report_arrays import _relative, _say, _Step

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "reports"
UNITS = ("mpu", "baseline")


def sweep(sizes, reuse: bool, steps: list) -> list:
    from .synth import synthesize

    rows = []
    for n in sizes:
        cfg = preset("tiny", rows=n, cols=n, vpu_lanes=n)
        for unit in UNITS:
            with _Step(steps, f"synth {unit} {n}x{n} ecp5"):
                r = synthesize(unit, cfg, "ecp5", reuse=reuse)
            rows.append(dict(unit=unit, size=n, config_hash=cfg.hash(),
                             resources=r["resources"], flow=r.get("flow", "flat"),
                             seconds=r["seconds"], reused=r.get("reused", False),
                             tools=r["tools"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fpga.sweep", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[2, 4, 6, 8])
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args(argv)
    steps = []
    res = dict(points=sweep(args.sizes, args.reuse, steps), steps=steps,
               generated=time.strftime("%Y-%m-%d"), base_preset="tiny")
    OUT.mkdir(exist_ok=True)
    (OUT / "sweep.json").write_text(json.dumps(_relative(res), indent=2) + "\n")
    _say(f"wrote {OUT / 'sweep.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
