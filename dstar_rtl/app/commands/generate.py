"""``dstar generate UNIT --preset P [--set k=v ...] -o FILE.v [--fusesoc] [--header]``: Verilog
plus a manifest, and on request a FuseSoC core and a C header beside them (gen/export.py).

Bad input (an unknown unit, an impossible configuration, an output that is a folder or whose
name another output takes, such as ``-o x.json``) is one line and exit status 2 before
elaboration; a Yosys failure is one line and exit status 1. The files appear together or not at
all; a missing output folder is created."""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.app.cli import UserError, WorkError
from dstar_rtl.app.options import add_config_options, check_unit, config_from_args
from dstar_rtl.gen.outputs import check_outputs, write_together
from dstar_rtl.gen.units import UNITS


def register(sub):
    p = sub.add_parser("generate", help="elaborate a unit to Verilog (+ manifest JSON)",
                       description="Elaborate a unit to Verilog through Yosys (proc, flatten) and "
                                   "write a manifest JSON beside it; --fusesoc and --header add a "
                                   "FuseSoC core and a C header from the same configuration.")
    p.add_argument("unit", choices=sorted(UNITS), help="which unit")
    add_config_options(p)
    p.add_argument("-o", "--output", required=True, type=Path,
                   help="Verilog file to write (FILE.v: the manifest is FILE.json); a missing "
                        "folder is created")
    p.add_argument("--hierarchy", action="store_true", help="keep the module hierarchy")
    p.add_argument("--fusesoc", action="store_true",
                   help="also write a FuseSoC CAPI2 core, OUTPUT with suffix .core")
    p.add_argument("--header", action="store_true",
                   help="also write a C header (configuration, stream layouts, VPU op codes), "
                        "OUTPUT with suffix .h")
    p.set_defaults(func=run)


def _outputs(args) -> dict:
    """``{what: path}`` of every file the command writes; refuses (one line) two that coincide or
    one that cannot be written."""
    from dstar_rtl.gen.generate import manifest_path

    out = args.output
    check_outputs(out)
    paths = {"Verilog": out, "manifest": manifest_path(out)}
    if args.fusesoc:
        paths["FuseSoC core"] = out.with_suffix(".core")
    if args.header:
        paths["C header"] = out.with_suffix(".h")
    for what, path in list(paths.items())[1:]:
        if path == out:
            raise UserError(f"the Verilog {out} would be overwritten by the {what}: name the "
                            f"Verilog file *.v")
    check_outputs(*paths.values())
    return paths


def run(args):
    from dstar_rtl.gen.export import c_header, fusesoc_core
    from dstar_rtl.gen.generate import render
    from dstar_rtl.gen.yosys import YosysError

    cfg = config_from_args(args)
    paths = _outputs(args)
    check_unit(args.unit, cfg)  # the unit's own parameter checks, before elaboration
    # Every artefact is made before anything is written (elaboration first: it runs the unit's
    # own parameter checks); then all are written together.
    try:
        files, man = render(args.unit, cfg, args.output, flatten=not args.hierarchy)
    except YosysError as exc:
        raise WorkError(str(exc)) from None
    if args.fusesoc:
        files[paths["FuseSoC core"]] = fusesoc_core(args.unit, cfg, args.output.name)
    if args.header:
        files[paths["C header"]] = c_header(args.unit, cfg)
    write_together(files, record_command=False)   # the manifest: same configuration, same bytes
    written = [str(p) for p in list(paths.values())[1:]]
    print(f"wrote {args.output} ({man['top']}, {len(man['ports'])} ports, config "
          f"{man['config_hash']}) and {', '.join(written)}")
    return 0
