"""``dstar generate UNIT --preset P [--set k=v ...] -o FILE.v``: Verilog plus a manifest."""

from __future__ import annotations

from pathlib import Path

from .options import add_config_options, config_from_args
from .units import UNITS


def register(sub):
    p = sub.add_parser("generate", help="elaborate a unit to Verilog (+ manifest JSON)",
                       description="Elaborate a unit to Verilog through Yosys (proc, flatten) and "
                                   "write a manifest JSON beside it.")
    p.add_argument("unit", choices=sorted(UNITS), help="which unit")
    add_config_options(p)
    p.add_argument("-o", "--output", required=True, type=Path, help="Verilog file to write")
    p.add_argument("--hierarchy", action="store_true", help="keep the module hierarchy")
    p.set_defaults(func=run)


def run(args):
    from .generate import generate

    cfg = config_from_args(args)
    man = generate(args.unit, cfg, args.output, flatten=not args.hierarchy)
    nports = len(man["ports"])
    print(f"wrote {args.output} ({man['top']}, {nports} ports, config {man['config_hash']}) "
          f"and {args.output.with_suffix('.json')}")
    return 0
