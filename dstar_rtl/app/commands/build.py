"""``dstar build``: a bitstream of the core for a board (flows/board.py).

Bad input (an unknown board, a configuration the core refuses or whose DSP blocks the device
does not have, a clock the board's PLL cannot make, a baud rate the clock cannot make, an output
folder that is a file, a ``--timeout`` that is not positive) is one line and exit status 2
before anything is elaborated or written. A failing step, a tool stopped at ``--timeout`` or
missed timing is one line (naming the tool's log) and
exit status 1; with missed timing the bitstream, ``build.json`` and the build's record
``reports/board-<board>-<preset>.json`` (:class:`app.reports.board.BoardBuild`) are written
anyway (they record it), together, as on success."""

from __future__ import annotations

from pathlib import Path

from dstar_rtl.app.cli import WorkError
from dstar_rtl.app.options import add_config_options, checking, config_from_args, require_extra
from dstar_rtl.gen.outputs import check_output_dir, check_outputs

__all__ = ["register"]


def register(sub):
    from dstar_rtl.flows.board import BOARDS

    p = sub.add_parser(
        "build", help="build a bitstream of the core behind a UART for a board",
        description="Elaborate the board top (the core behind the UART host link), synthesize "
                    "(Yosys), place and route (nextpnr) and pack the bitstream, all with the "
                    "yowasp tools; print the resources and the Fmax nextpnr reports. Boards: " +
                    "; ".join(f"{k}: {v[2]} (default preset {v[1]})" for k, v in BOARDS.items()))
    p.add_argument("--board", required=True, choices=sorted(BOARDS))
    add_config_options(p, default_preset=None)
    p.add_argument("--baud", type=int, default=115200, help="UART baud rate (default 115200)")
    p.add_argument("--clock-mhz", type=float, default=None, metavar="MHZ",
                   help="the core's clock in MHz (default: the board's clock, 25 MHz on the "
                        "ulx3s); another value is made by the FPGA's PLL, and the UART's "
                        "cycles per bit follow it")
    p.add_argument("--timeout", type=float, default=None, metavar="MINUTES",
                   help="stop a tool (Yosys, nextpnr) that runs longer than this and fail with "
                        "one line (default: no limit; nextpnr's router can run for hours on a "
                        "device it cannot route)")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="output directory, created if missing (default "
                        "build/board/<board>-<preset>)")
    p.set_defaults(func=run_build)


def run_build(args):
    from dstar_rtl.flows.board import BOARDS, BuildError, build, check_build, output_files

    if args.preset is None:
        args.preset = BOARDS[args.board][1]
    cfg = config_from_args(args)
    out = args.out or Path("build") / "board" / f"{args.board}-{cfg.name}"
    require_extra("fpga", "dstar build")  # the board's definition, nextpnr, ecppack
    with checking():
        check_build(args.board, cfg, args.baud, args.clock_mhz)
        if args.timeout is not None and not args.timeout > 0:
            raise ValueError(f"--timeout must be a positive number of minutes, not "
                             f"{args.timeout:g}")
    from dstar_rtl.app.reports.board import record, record_path

    check_output_dir(out)
    check_outputs(*output_files(args.board, cfg, out), record_path(args.board, cfg.name))
    try:
        r = build(args.board, cfg, out, baud=args.baud, clock_mhz=args.clock_mhz,
                  timeout=None if args.timeout is None else args.timeout * 60, record=record)
    except BuildError as e:
        raise WorkError(str(e)) from None
    res = r["resources"]
    print(f"{r['bitstream']}: {res['lut4']} LUT4, {res['ff']} FF, {res['dsp']} DSP, "
          f"{res['bram']} BRAM; Fmax {r['fmax_mhz']} MHz at {r['constraint_mhz']:g} MHz "
          f"({'met' if r['timing_pass'] else 'NOT met'}); {r['seconds']:.0f} s")
    return 0
