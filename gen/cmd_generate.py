"""``dstar generate UNIT --preset P [--set k=v ...] -o FILE.v [--fusesoc] [--header]``: Verilog
plus a manifest, and on request a FuseSoC core and a C header beside them (gen/export.py)."""

from __future__ import annotations

from pathlib import Path

from .options import add_config_options, config_from_args
from .units import UNITS


def register(sub):
    p = sub.add_parser("generate", help="elaborate a unit to Verilog (+ manifest JSON)",
                       description="Elaborate a unit to Verilog through Yosys (proc, flatten) and "
                                   "write a manifest JSON beside it; --fusesoc and --header add a "
                                   "FuseSoC core and a C header from the same configuration.")
    p.add_argument("unit", choices=sorted(UNITS), help="which unit")
    add_config_options(p)
    p.add_argument("-o", "--output", required=True, type=Path, help="Verilog file to write")
    p.add_argument("--hierarchy", action="store_true", help="keep the module hierarchy")
    p.add_argument("--fusesoc", action="store_true",
                   help="also write a FuseSoC CAPI2 core, OUTPUT with suffix .core")
    p.add_argument("--header", action="store_true",
                   help="also write a C header (configuration, stream layouts, VPU op codes), "
                        "OUTPUT with suffix .h")
    p.set_defaults(func=run)


def _write(path: Path, text: str):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def run(args):
    from .export import c_header, fusesoc_core
    from .generate import generate

    cfg = config_from_args(args)
    out = args.output
    # The artefacts are made before anything is written, so a failure leaves no file behind.
    extra = {}
    if args.fusesoc:
        extra[out.with_suffix(".core")] = fusesoc_core(args.unit, cfg, out.name)
    if args.header:
        extra[out.with_suffix(".h")] = c_header(args.unit, cfg)
    for path in extra:
        if path == out:
            raise ValueError(f"the output {out} would be overwritten by {path.suffix}: "
                             f"name the Verilog file *.v")
    man = generate(args.unit, cfg, out, flatten=not args.hierarchy)
    for path, text in extra.items():
        _write(path, text)
    written = [str(out.with_suffix(".json")), *map(str, extra)]
    print(f"wrote {out} ({man['top']}, {len(man['ports'])} ports, config {man['config_hash']}) "
          f"and {', '.join(written)}")
    return 0
