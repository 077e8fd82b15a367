"""Where the project's files are: the checkout, its reports and its build folders.

Every module takes its paths from here. The build folders can be moved with environment
variables (for a scratch disk, or to keep two checkouts' builds apart):

- ``DSTAR_BUILD``: the simulator models (default ``build/sim``);
- ``DSTAR_FPGA_BUILD``: synthesis and place-and-route work folders (default ``build/fpga``);
- ``DSTAR_FORMAL_BUILD``: SymbiYosys work folders (default ``build/formal``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "REPORTS", "BUILD", "SIM_BUILD", "FPGA_BUILD", "FORMAL_BUILD", "relative",
           "relative_paths"]

#: The checkout: the folder holding the package ``dstar_rtl/``, ``reports/`` and ``tests/``.
ROOT = Path(__file__).resolve().parents[2]
#: The measured reports (JSON plus Markdown) that ``make reports`` regenerates.
REPORTS = ROOT / "reports"
#: Build products (``make clean`` removes it).
BUILD = ROOT / "build"
SIM_BUILD = Path(os.environ.get("DSTAR_BUILD", BUILD / "sim"))
FPGA_BUILD = Path(os.environ.get("DSTAR_FPGA_BUILD", BUILD / "fpga"))
FORMAL_BUILD = Path(os.environ.get("DSTAR_FORMAL_BUILD", BUILD / "formal"))


def relative(path) -> str:
    """``path`` relative to the checkout when it lies inside it (for reports and messages),
    else as given."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(path)


def relative_paths(obj):
    """``obj`` (nested dicts, lists, strings) with every path inside the checkout written
    relative to it: what a report stores, so that it reads the same on every machine."""
    root = str(ROOT) + os.sep
    if isinstance(obj, dict):
        return {k: relative_paths(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [relative_paths(v) for v in obj]
    if isinstance(obj, str) and root in obj:
        return obj.replace(root, "")
    return obj
