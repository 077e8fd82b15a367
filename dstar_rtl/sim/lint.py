"""Verilator ``--lint-only -Wall`` on generated Verilog, with the committed waivers of
``sim/lint.vlt`` (one documented class per entry)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .runner import simulator_path

WAIVERS = Path(__file__).with_name("lint.vlt")

__all__ = ["lint", "WAIVERS"]


def lint(verilog: Path, top: str) -> list:
    """Warnings and errors Verilator reports (after waivers), one string per message."""
    env = {**os.environ, "PATH": simulator_path()}
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(verilog),
                           "--top-module", top], capture_output=True, text=True, env=env)
    msgs = [line for line in proc.stderr.splitlines() if re.match(r"%(Warning|Error)", line)]
    if proc.returncode != 0 and not msgs:
        msgs.append(proc.stderr.strip() or f"verilator exited {proc.returncode}")
    return msgs
